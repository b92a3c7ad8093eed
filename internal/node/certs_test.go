package node

import (
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// An agent's cast (`cast mcp`, `cast spawn`) gets the node's credential:
// with TLS its certificate and the CA pin (a node joined by certificate
// has no token file), else its token file.
func TestCastEnvCarriesTheNodesCredential(t *testing.T) {
	for _, tc := range []struct {
		name, pin string
		want      []string
		not       string
	}{
		{"tls", "sha256:" + strings.Repeat("0", 64), []string{"CAST_CLIENT_CERT", "CAST_CA_PIN"}, "CAST_TOKEN_FILE"},
		{"plaintext", "", []string{"CAST_TOKEN_FILE"}, "CAST_CLIENT_CERT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Name, cfg.DataDir, cfg.ControlPlane, cfg.CAPin = "n1", t.TempDir(), "127.0.0.1:1", tc.pin
			a, err := New(cfg, zap.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			defer a.cli.Close()
			env := a.castEnv("s1")
			for _, k := range tc.want {
				if env[k] == "" {
					t.Errorf("%s missing: %v", k, env)
				}
			}
			if _, ok := env[tc.not]; ok {
				t.Errorf("%s set: %v", tc.not, env)
			}
			if tc.pin != "" && env["CAST_CLIENT_CERT"] != filepath.Join(cfg.DataDir, "identity.pem") {
				t.Errorf("CAST_CLIENT_CERT %q", env["CAST_CLIENT_CERT"])
			}
		})
	}
}
