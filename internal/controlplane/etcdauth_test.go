package controlplane_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/etcdembed"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// The embedded etcd runs with auth: a plain etcd client on its loopback
// client port reads nothing (owner tokens included), while the control
// plane connects as root with the password it keeps 0600 in the data dir,
// and reuses it after a restart.
func TestEmbeddedEtcdRefusesClientsWithoutCredentials(t *testing.T) {
	t.Parallel()
	cfg := testharness.ControlPlaneConfig(t)
	etcdAddr, err := etcdembed.FreeAddr("127.0.0.1") // kept across the restart
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen, cfg.EtcdClient = freeAddr(t), etcdAddr
	start, srv, c, sess := restartable(t, cfg)
	ctx := ctxT(t)
	ep := "http://" + cfg.EtcdClient
	owners := cfg.Store.Prefix + "owners/"

	anon := etcdClient(t, ep, "", "")
	for _, key := range []string{owners, cfg.Store.Prefix, ""} {
		resp, err := anon.Get(ctx, key, clientv3.WithPrefix())
		if !errors.Is(rpctypes.Error(err), rpctypes.ErrUserEmpty) {
			t.Fatalf("read %q without credentials: %v %v, want %v", key, resp, err, rpctypes.ErrUserEmpty)
		}
	}
	if _, err := anon.Put(ctx, owners+sess.Id, "x"); !errors.Is(rpctypes.Error(err), rpctypes.ErrUserEmpty) {
		t.Fatalf("write without credentials: %v", err)
	}
	if _, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second,
		Username: etcdembed.RootUser, Password: "guessed", Logger: zap.NewNop()}); !errors.Is(rpctypes.Error(err), rpctypes.ErrAuthFailed) {
		t.Fatalf("root with a wrong password: %v, want %v", err, rpctypes.ErrAuthFailed)
	}

	pwFile := filepath.Join(cfg.DataDir, etcdembed.PasswordFileName)
	pw := readPrivate(t, pwFile)
	// The refusal is auth, not absence: root reads the owner token.
	if resp, err := etcdClient(t, ep, etcdembed.RootUser, pw).Get(ctx, owners+sess.Id); err != nil || resp.Count != 1 {
		t.Fatalf("root reads the owner record: %v %v", resp, err)
	}

	srv.Stop()
	start()
	if got := readPrivate(t, pwFile); got != pw {
		t.Fatal("the restart replaced the root password")
	}
	testharness.WaitFor(t, 30*time.Second, "the session read back after a restart", func() bool {
		got, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sess.Id})
		return err == nil && got.Id == sess.Id
	})
}

// etcdClient is a plain clientv3 on ep, as root when user is given.
func etcdClient(t *testing.T, ep, user, pw string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second, Username: user, Password: pw,
		Logger: zap.NewNop()}) // its refusals are what the test expects
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// readPrivate reads a 0600 one-line file.
func readPrivate(t *testing.T, path string) string {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s has mode %04o, want 0600", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// The embedded etcd's client port never leaves loopback.
func TestEmbeddedEtcdListensOnLoopbackOnly(t *testing.T) {
	t.Parallel()
	cfg := testharness.ControlPlaneConfig(t)
	cfg.EtcdClient = "0.0.0.0:2379"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "--etcd-listen") {
		t.Fatalf("Validate() = %v, want a refusal naming --etcd-listen", err)
	}
}
