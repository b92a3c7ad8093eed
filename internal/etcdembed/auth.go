package etcdembed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/auth"
	"go.etcd.io/etcd/server/v3/etcdserver"

	"github.com/cast-dev/cast/internal/fsutil"
)

// RootUser is the etcd user the control plane connects as when the
// member runs with auth (Config.PasswordFile).
const RootUser = "root"

// PasswordFileName is where the control plane keeps the root password,
// in the embedded etcd's data dir.
const PasswordFileName = "etcd-root.password"

// ErrPasswordFile: the root password file is missing, unreadable, open to
// others, or does not match the member's root user.
var ErrPasswordFile = errors.New("embedded etcd root password")

// enableAuth makes sure the member runs with auth and a root user whose
// password is in file, and returns that password. On the first start it
// generates one, writes it (0600, atomically) before etcd learns it, so a
// crash between the steps leaves a password that the next start reuses;
// every step is repeatable. Later starts only check it.
func enableAuth(ctx context.Context, srv *etcdserver.EtcdServer, file string) (string, error) {
	enabled := srv.AuthStore().IsAuthEnabled()
	pw, err := readPassword(file)
	switch {
	case errors.Is(err, fs.ErrNotExist) && enabled:
		return "", fmt.Errorf("%w: etcd auth is on but %s is missing: restore it from a backup of the data dir (the data is unreadable without it)", ErrPasswordFile, file)
	case errors.Is(err, fs.ErrNotExist):
		if pw, err = newPassword(file); err != nil {
			return "", err
		}
	case err != nil:
		return "", err
	}
	if enabled {
		if _, err := srv.AuthStore().CheckPassword(RootUser, pw); err != nil {
			return "", fmt.Errorf("%w: the password in %s is not etcd's root password (%v): restore the file that belongs to this data dir", ErrPasswordFile, file, err)
		}
		return pw, nil
	}
	// Auth is off: these requests need no credentials yet.
	_, err = srv.UserAdd(ctx, &pb.AuthUserAddRequest{Name: RootUser, Password: pw})
	if errors.Is(err, auth.ErrUserAlreadyExist) { // a start that crashed before AuthEnable
		_, err = srv.UserChangePassword(ctx, &pb.AuthUserChangePasswordRequest{Name: RootUser, Password: pw})
	}
	if err != nil {
		return "", fmt.Errorf("etcdembed: add the root user: %w", err)
	}
	if _, err := srv.UserGrantRole(ctx, &pb.AuthUserGrantRoleRequest{User: RootUser, Role: "root"}); err != nil {
		return "", fmt.Errorf("etcdembed: grant root: %w", err)
	}
	if _, err := srv.AuthEnable(ctx, &pb.AuthEnableRequest{}); err != nil {
		return "", fmt.Errorf("etcdembed: enable auth: %w", err)
	}
	return pw, nil
}

// newPassword writes a random password to file (0600, atomically).
func newPassword(file string) (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	pw := hex.EncodeToString(b)
	if err := fsutil.WriteFileAtomic(file, []byte(pw+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("%w: write %s: %v", ErrPasswordFile, file, err)
	}
	return pw, nil
}

// readPassword reads file, refusing one others may read.
func readPassword(file string) (string, error) {
	fi, err := os.Stat(file)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		return "", fmt.Errorf("%w: %v", ErrPasswordFile, err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%w: %s has mode %04o: allow no more than 0600 (chmod 600 it)", ErrPasswordFile, file, fi.Mode().Perm())
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrPasswordFile, err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return "", fmt.Errorf("%w: %s is empty: restore it from a backup of the data dir", ErrPasswordFile, file)
	}
	return pw, nil
}
