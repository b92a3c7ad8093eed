package etcdembed

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/cast-dev/cast/internal/fsutil"
)

// A port taken before etcd binds it is recognised, so Start can pick
// again when the port was its own pick (a port freed by pick may be taken
// by another process before the bind).
func TestTakenPortIsRecognised(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := Config{Dir: t.TempDir(), ClientAddr: l.Addr().String(), PeerAddr: "127.0.0.1:0", QuotaBytes: 64 << 20, NoAuth: true}
	e, err := Start(ctx, c, zaptest.NewLogger(t))
	if err == nil {
		e.Close()
		t.Fatal("etcd started on a port that is taken")
	}
	if !addrInUse(err) {
		t.Fatalf("not recognised as a taken port: %v", err)
	}
	// Picked ports work around it.
	c.ClientAddr, c.Dir = "127.0.0.1:0", t.TempDir()
	e, err = Start(ctx, c, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
}

func TestConfigValidate(t *testing.T) {
	ok := Config{ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", PasswordFile: "pw"}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string // "" for valid
	}{
		{"auth", func(*Config) {}, ""},
		{"no auth, for tests", func(c *Config) { c.PasswordFile, c.NoAuth = "", true }, ""},
		{"neither", func(c *Config) { c.PasswordFile = "" }, "give PasswordFile"},
		{"both", func(c *Config) { c.NoAuth = true }, "exclude each other"},
		{"auth in a cluster", func(c *Config) { c.InitialCluster = "a=http://127.0.0.1:1" }, "member of one"},
		{"open client port", func(c *Config) { c.ClientAddr = "0.0.0.0:2379" }, "not a loopback address"},
		{"open peer port", func(c *Config) { c.PeerAddr = "10.0.0.1:2380" }, "not a loopback address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			err := c.Validate()
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

// The root password is generated once and kept 0600; a later start
// reuses it, and refuses a missing, changed or readable-by-others file
// rather than starting a member nobody can use.
func TestRootPasswordKeptAndChecked(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	pwFile := filepath.Join(t.TempDir(), PasswordFileName)
	c := Config{Dir: dir, ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", QuotaBytes: 64 << 20, PasswordFile: pwFile}
	start := func() (*Etcd, error) { return Start(ctx, c, zaptest.NewLogger(t)) }
	e, err := start()
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	first := e.Password
	fi, err := os.Stat(pwFile)
	if err != nil || fi.Mode().Perm() != 0o600 || e.User != RootUser || len(first) < 32 {
		t.Fatalf("password file %v %v, user %q", fi, err, e.User)
	}
	if e, err = start(); err != nil || e.Password != first {
		t.Fatalf("restart: %v, password reused: %v", err, err == nil && e.Password == first)
	}
	e.Close()
	for _, tc := range []struct {
		name string
		edit func() error
		want string
	}{
		{"readable by others", func() error { return os.Chmod(pwFile, 0o644) }, "chmod 600"},
		{"another password", func() error { return fsutil.WriteFileAtomic(pwFile, []byte("not-it\n"), 0o600) }, "not etcd's root password"},
		{"missing", func() error { return os.Remove(pwFile) }, "is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.edit(); err != nil {
				t.Fatal(err)
			}
			e, err := start()
			if err == nil {
				e.Close()
			}
			if !errors.Is(err, ErrPasswordFile) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("start: %v, want %v saying %q", err, ErrPasswordFile, tc.want)
			}
		})
	}
}

// A data dir from before auth (an open member) is started with auth: the
// data stays, the client port then refuses anyone without the password,
// and the peer port, open before, refuses anyone without a client
// certificate.
func TestAuthOnAnOpenDataDir(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := Config{Dir: t.TempDir(), ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", QuotaBytes: 64 << 20, NoAuth: true}
	e, err := Start(ctx, c, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	cli := dial(t, e.ClientURL, "", "")
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := peerGet(e.PeerURL); err != nil {
		t.Fatalf("the open member's peer port: %v", err) // what auth must close
	}
	cli.Close()
	e.Close()

	c.NoAuth, c.PasswordFile = false, filepath.Join(t.TempDir(), PasswordFileName)
	if e, err = Start(ctx, c, zaptest.NewLogger(t)); err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if _, err := dial(t, e.ClientURL, "", "").Get(ctx, "k"); !errors.Is(rpctypes.Error(err), rpctypes.ErrUserEmpty) {
		t.Fatalf("read without credentials: %v, want %v", err, rpctypes.ErrUserEmpty)
	}
	if resp, err := dial(t, e.ClientURL, e.User, e.Password).Get(ctx, "k"); err != nil || resp.Count != 1 {
		t.Fatalf("root reads the old data: %v %v", resp, err)
	}
	if !strings.HasPrefix(e.PeerURL, "https://") {
		t.Fatalf("peer URL %s", e.PeerURL)
	}
	if err := peerGet(e.PeerURL); err == nil {
		t.Fatal("the peer port answered a client without a certificate")
	}
}

func dial(t *testing.T, ep, user, pw string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Username: user, Password: pw,
		Logger: zap.NewNop()}) // its refusals are what the test expects
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// peerGet asks the peer port for the member list, as another local
// process could; with TLS it trusts any server certificate, so only the
// missing client certificate can stop it.
func peerGet(peerURL string) error {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // any server: only the client side is tested
	resp, err := hc.Get(peerURL + "/members")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %s", resp.Status)
	}
	return nil
}

// Two picks in one process never give the same port, even before either
// is bound: parallel tests each pick their ports, then start.
func TestFreeAddrNeverRepeatsAPort(t *testing.T) {
	seen := map[string]bool{}
	for range 500 {
		addr, err := FreeAddr("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if seen[addr] {
			t.Fatalf("FreeAddr gave %s twice", addr)
		}
		seen[addr] = true
	}
}
