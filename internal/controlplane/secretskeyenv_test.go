package controlplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// CAST_SECRETS_KEY (Config.SecretsKey) is the key itself: it wins over
// the key file, nothing is written to the data dir, and a malformed value
// is refused without being echoed.
func TestSecretsKeyFromEnv(t *testing.T) {
	t.Parallel()
	const key = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
	for _, tc := range []struct {
		name, key, wantErr string
	}{
		{"valid", key, ""},
		{"short", key[:10], "want 64 hex characters"},
		{"not hex", strings.Repeat("zq", 32), "not hex"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := &Server{cfg: Config{DataDir: dir, SecretsKey: tc.key}, lg: zap.NewNop()}
			box, err := s.openBox()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), SecretsKeyEnv) {
					t.Fatalf("openBox: %v; want an error naming %s saying %q", err, SecretsKeyEnv, tc.wantErr)
				}
				if strings.Contains(err.Error(), tc.key) {
					t.Fatalf("the error echoes the key: %v", err)
				}
				return
			}
			if err != nil || box == nil {
				t.Fatalf("openBox: %v", err)
			}
			if _, err := os.Stat(filepath.Join(dir, "secrets.key")); !os.IsNotExist(err) {
				t.Errorf("a key file was made in the data dir though the key came from the env: %v", err)
			}
			// The same key from a file opens what the env's key sealed.
			sealed, err := box.Seal([]byte("credential"), []byte("aad"))
			if err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), "k")
			if err := os.WriteFile(file, []byte(key+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			fromFile, err := (&Server{cfg: Config{SecretsKeyFile: file}, lg: zap.NewNop()}).openBox()
			if err != nil {
				t.Fatal(err)
			}
			if pt, err := fromFile.Open(sealed, []byte("aad")); err != nil || string(pt) != "credential" {
				t.Errorf("the file's key does not open the env key's seal: %q %v", pt, err)
			}
		})
	}
}
