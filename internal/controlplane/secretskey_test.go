package controlplane_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/secrets"
	"github.com/cast-dev/cast/internal/testharness"
)

// Outside --dev the secrets key never lies in the data dir (symlinks
// resolved), and a key an earlier version left there is not silently
// replaced by a new one that could not open what it sealed.
func TestSecretsKeyLivesApartFromData(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	data, conf := filepath.Join(root, "data"), filepath.Join(root, "conf")
	for _, d := range []string{data, conf} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(data, filepath.Join(conf, "into-data")); err != nil {
		t.Fatal(err)
	}
	oldKey := filepath.Join(root, "old-data")
	if err := os.MkdirAll(oldKey, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(oldKey, "secrets.key"), []byte("00\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name         string
		dev          bool
		dataDir, key string
		want         string // "" for valid
	}{
		{"apart", false, data, filepath.Join(conf, "secrets.key"), ""},
		{"inside", false, data, filepath.Join(data, "secrets.key"), "is inside --data-dir"},
		{"inside, deeper", false, data, filepath.Join(data, "keys", "k"), "move it out"},
		{"through a symlink", false, data, filepath.Join(conf, "into-data", "secrets.key"), "is inside --data-dir"},
		{"the data dir itself", false, data, data, "is inside --data-dir"},
		{"dev keeps it in the data dir", true, data, filepath.Join(data, "secrets.key"), ""},
		{"an earlier version's key left behind", false, oldKey, filepath.Join(conf, "new.key"), "mv " + filepath.Join(oldKey, "secrets.key")},
		{"an earlier version's key, no flag", false, oldKey, "", "give its new path as --secrets-key-file"},
		{"no data dir (external etcd)", false, "", filepath.Join(conf, "secrets.key"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testharness.ControlPlaneConfig(t)
			cfg.DataDir, cfg.SecretsKeyFile, cfg.Dev = tc.dataDir, tc.key, tc.dev
			if tc.dataDir == "" {
				cfg.EtcdEndpoints = []string{"http://127.0.0.1:2379"}
			}
			err := cfg.Validate()
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

// A control plane keeps its key where it is told, outside the data dir,
// and seals fleet credentials with it; --dev keeps it in the data dir.
func TestSecretsKeyWhereConfigured(t *testing.T) {
	t.Parallel()
	for _, dev := range []bool{false, true} {
		t.Run(map[bool]string{false: "apart", true: "dev"}[dev], func(t *testing.T) {
			cfg := testharness.ControlPlaneConfig(t)
			cfg.Dev = dev
			key := filepath.Join(t.TempDir(), "conf", "secrets.key")
			if dev {
				key = ""
			}
			cfg.SecretsKeyFile = key
			srv := testharness.StartControlPlane(t, func(c *controlplane.Config) { *c = cfg })
			c := testharness.Dial(t, srv.Addr())
			if _, err := c.Accounts.PutAccount(ctxT(t), &castv1.PutAccountRequest{Agent: "claude", Name: "a",
				Credential: []byte(`{"claudeAiOauth":{"accessToken":"sk-ant-oat01-x"}}`)}); err != nil {
				t.Fatalf("put a fleet account: %v", err)
			}
			inData := filepath.Join(cfg.DataDir, controlplane.SecretsKeyFileName)
			want, absent := key, inData
			if dev {
				want, absent = inData, ""
			}
			if fi, err := os.Stat(want); err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("key file %s: %v %v", want, fi, err)
			}
			if _, err := os.Stat(absent); absent != "" && !os.IsNotExist(err) {
				t.Fatalf("a key in the data dir outside --dev: %v", err)
			}
		})
	}
}

// A secrets key file gone missing is never replaced by a new key once the
// store holds something sealed: the new key could not open it, and what it
// sealed the other replicas could not open. A replica started without the
// file is refused, naming it; one whose file disappears while it runs
// refuses to seal (a rotated CA's key) with SECRETS_KEY_MISSING.
func TestMissingSecretsKeyIsNotReplaced(t *testing.T) {
	t.Parallel()
	t.Run("at start", func(t *testing.T) {
		t.Parallel()
		conf := t.TempDir()
		key := filepath.Join(conf, "secrets.key")
		var dataDir string
		srv := testharness.StartControlPlane(t, func(c *controlplane.Config) { c.SecretsKeyFile, dataDir = key, c.DataDir })
		c := testharness.Dial(t, srv.Addr())
		if _, err := c.Accounts.PutAccount(ctxT(t), &castv1.PutAccountRequest{Agent: "claude", Name: "a",
			Credential: []byte(`{"claudeAiOauth":{"accessToken":"sk-ant-oat01-x"}}`)}); err != nil {
			t.Fatalf("put a fleet account: %v", err)
		}
		srv.Stop()
		missing := filepath.Join(conf, "elsewhere", "secrets.key")
		cfg := testharness.ControlPlaneConfig(t)
		cfg.DataDir, cfg.SecretsKeyFile = dataDir, missing
		s, err := controlplane.Start(ctxT(t), cfg, zaptest.NewLogger(t))
		if err == nil {
			s.Stop()
			t.Fatal("started with a new secrets key beside fleet credentials sealed with another")
		}
		if !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "fleet account") {
			t.Errorf("the refusal does not name the missing key file and what needs it: %v", err)
		}
		if _, err := os.Stat(missing); !os.IsNotExist(err) {
			t.Errorf("a new key file was made: %v", err)
		}
	})
	t.Run("a login in custody without its account", func(t *testing.T) {
		// Custody keeps a login sealed under custody/, apart from the
		// account: left there when `cast account rm` removed the account
		// and not (yet) its custody record, or when `cast account add`
		// put it in custody and then failed to store the account.
		t.Parallel()
		ctx := ctxT(t)
		ep := testharness.StartEtcd(t, nil)
		k, err := secrets.LoadOrCreateKey(filepath.Join(t.TempDir(), "secrets.key"))
		must(t, err)
		box, err := secrets.NewBox(k)
		must(t, err)
		cred := fmt.Appendf(nil, `{"claudeAiOauth":{"accessToken":"sk-ant-oat01-x","refreshToken":"sk-ant-ort01-y","expiresAt":%d}}`,
			time.Now().Add(time.Hour).UnixMilli())
		if _, err := testharness.OpenStore(t, ep, nil).Vault(box, agents.CredentialFor).Add(ctx, "claude", "gone", cred); err != nil {
			t.Fatal(err)
		}
		missing := filepath.Join(t.TempDir(), "secrets.key")
		cfg := testharness.ControlPlaneConfig(t)
		cfg.EtcdEndpoints, cfg.DataDir, cfg.SecretsKeyFile = []string{ep}, "", missing
		s, err := controlplane.Start(ctx, cfg, zaptest.NewLogger(t))
		if err == nil {
			s.Stop()
			t.Fatal("started with a new secrets key beside a login in custody sealed with another")
		}
		if !strings.Contains(err.Error(), missing) {
			t.Errorf("the refusal does not name the missing key file: %v", err)
		}
		if _, err := os.Stat(missing); !os.IsNotExist(err) {
			t.Errorf("a new key file was made: %v", err)
		}
	})
	t.Run("while running", func(t *testing.T) {
		t.Parallel()
		key := filepath.Join(t.TempDir(), "secrets.key")
		srv := testharness.StartControlPlane(t, func(c *controlplane.Config) { c.TLS.Enabled, c.SecretsKeyFile = true, key })
		admin, _ := testharness.DialFollowing(t, srv.Addr(), srv.CAPin(), testharness.AdminToken(), nil)
		must(t, os.Remove(key))
		_, err := admin.Auth.RotateCA(ctxT(t), &castv1.RotateCARequest{})
		wantCode(t, "rotate with the secrets key file gone", err, codes.FailedPrecondition, errs.ReasonNoSecretsKey)
		if !strings.Contains(status.Convert(err).Message(), key) {
			t.Errorf("the refusal does not name the missing key file: %v", err)
		}
		if _, err := os.Stat(key); !os.IsNotExist(err) {
			t.Errorf("a new key file was made: %v", err)
		}
	})
}
