package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/metrics"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

func openWith(t *testing.T, ep string, a store.Access) (*store.Store, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := store.DefaultConfig()
	cfg.QuotaBytes = 256 << 20
	s, err := store.Open(ctx, []string{ep}, a, cfg, metrics.NewStore(nil), zaptest.NewLogger(t))
	if err == nil {
		t.Cleanup(func() { s.Close() })
	}
	return s, err
}

func TestOpenTLSEtcd(t *testing.T) {
	e := testharness.StartSecureEtcd(t)
	ep, ca, other, cert, key := e.URL, e.CA, e.OtherCA, e.Cert, e.Key
	strangerCert, strangerKey := other.Issue(t, e.Dir, "stranger", false)

	for _, tc := range []struct {
		name string
		a    store.Access
		want error // nil: the store serves
		msg  string
	}{
		{"right CA and client cert", store.Access{CACert: ca.File, Cert: cert, Key: key}, nil, ""},
		{"wrong CA", store.Access{CACert: other.File, Cert: cert, Key: key}, store.ErrEtcdServerCert, "certificate signed by unknown authority"},
		{"no client cert", store.Access{CACert: ca.File}, store.ErrEtcdClientCert, "etcd refused the client certificate"},
		{"client cert of another CA", store.Access{CACert: ca.File, Cert: strangerCert, Key: strangerKey}, store.ErrEtcdClientCert, "etcd refused the client certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := openWith(t, ep, tc.a)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				ctx := context.Background()
				if _, err := s.RegisterNode(ctx, &castv1.Node{Name: "n1"}, "r1", time.Minute); err != nil {
					t.Fatalf("write over TLS: %v", err)
				}
				if nodes, err := s.ListNodes(ctx); err != nil || len(nodes) != 1 || nodes[0].GetName() != "n1" {
					t.Fatalf("read over TLS: %v %v", nodes, err)
				}
				return
			}
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("open: %v, want %v containing %q", err, tc.want, tc.msg)
			}
			t.Logf("refused: %v", err)
		})
	}
}

// TestOpenEtcdAuth: over TLS, a cast user whose role reaches only the
// store's prefix serves with the right password and is refused with a
// wrong one.
func TestOpenEtcdAuth(t *testing.T) {
	e := testharness.StartSecureEtcd(t)
	e.EnableAuth(t, "cast-user", "right-password")
	ep, ca, cert, key := e.URL, e.CA, e.Cert, e.Key

	for _, tc := range []struct {
		name, password string
		want           error
	}{
		{"right password", "right-password", nil},
		{"wrong password", "wrong-password", store.ErrEtcdAuth},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := store.Access{CACert: ca.File, Cert: cert, Key: key, User: "cast-user", Password: tc.password}
			s, err := openWith(t, ep, a)
			if tc.want != nil {
				if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), `"cast-user"`) {
					t.Fatalf("open: %v, want %v naming the user", err, tc.want)
				}
				if strings.Contains(err.Error(), tc.password) {
					t.Fatalf("the error shows the password: %v", err)
				}
				t.Logf("refused: %v", err)
				return
			}
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			if _, err := s.RegisterNode(context.Background(), &castv1.Node{Name: "n1"}, "r1", time.Minute); err != nil {
				t.Fatalf("write as cast-user: %v", err)
			}
		})
	}
}

func TestAccessValidate(t *testing.T) {
	dir := t.TempDir()
	ca := testharness.NewCA(t, dir, "ca")
	cert, key := ca.Issue(t, dir, "cast", false)
	open := filepath.Join(dir, "open-key.pem")
	if err := os.WriteFile(open, []byte("k"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o644); err != nil { // past the umask
		t.Fatal(err)
	}
	https, http := []string{"https://127.0.0.1:2379"}, []string{"http://127.0.0.1:2379"}
	for _, tc := range []struct {
		name string
		a    store.Access
		eps  []string
		want string // "" valid
	}{
		{"plaintext", store.Access{}, http, ""},
		{"CA, cert and key", store.Access{CACert: ca.File, Cert: cert, Key: key}, https, ""},
		{"user and password", store.Access{User: "u", Password: "p"}, http, ""},
		{"cert without key", store.Access{CACert: ca.File, Cert: cert}, https, "go together"},
		{"key without cert", store.Access{Key: key}, https, "go together"},
		{"missing CA file", store.Access{CACert: filepath.Join(dir, "nope.pem")}, https, "no such file"},
		{"world-readable key", store.Access{Cert: cert, Key: open}, https, "mode 0644"},
		{"TLS to an http endpoint", store.Access{CACert: ca.File}, http, "need https://"},
		{"mixed schemes", store.Access{CACert: ca.File}, append(https, http...), "mixes"},
		{"user without password", store.Access{User: "u"}, http, "needs a password"},
		{"password without user", store.Access{Password: "p"}, http, "needs a password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.a.Validate(tc.eps)
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestReadPassword(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body string
		mode       os.FileMode
		want, err  string
	}{
		{"0600 with newline", "s3cret\n", 0o600, "s3cret", ""},
		{"group-readable", "s3cret\n", 0o640, "", "mode 0640"},
		{"empty", "\n", 0o600, "", "is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			if err := os.WriteFile(p, []byte(tc.body), tc.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, tc.mode); err != nil {
				t.Fatal(err)
			}
			got, err := store.ReadPassword(p)
			if got != tc.want || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("ReadPassword = %q, %v; want %q, %q", got, err, tc.want, tc.err)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("the error shows the password: %v", err)
			}
		})
	}
}
