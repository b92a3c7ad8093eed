package secrets

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadToken(t *testing.T) {
	good := strings.Repeat("ab", 20)
	for _, tc := range []struct {
		name, body string
		mode       os.FileMode
		want       string // "" = ok
	}{
		{"ok with newline", good + "\n", 0o600, ""},
		{"ok owner read-only", "  " + good + "  ", 0o400, ""},
		{"readable by others", good, 0o644, "chmod 600"},
		{"too short", "short-token", 0o600, "at least 32"},
		{"two tokens", good + " " + good, 0o600, "one token"},
		{"empty", "", 0o600, "at least 32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "tok")
			if err := os.WriteFile(p, []byte(tc.body), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, tc.mode); err != nil {
				t.Fatal(err)
			}
			got, err := ReadToken(p)
			switch {
			case tc.want == "" && (err != nil || got != good):
				t.Fatalf("ReadToken = %q, %v", got, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("ReadToken err = %v, want %q", err, tc.want)
			case err != nil && tc.body != "" && strings.Contains(err.Error(), strings.TrimSpace(tc.body)):
				t.Fatalf("the error shows the token: %v", err)
			}
		})
	}
	if !TokenEqual(good, good) || TokenEqual(good, good+"x") || TokenEqual("", good) {
		t.Fatal("TokenEqual")
	}
}
