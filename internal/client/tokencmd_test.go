package client

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// helper writes a token-command that records its argv, counts its runs
// and prints dir/token (a script the test writes: the command itself is
// run without a shell).
type helper struct {
	t   *testing.T
	dir string
}

func newHelper(t *testing.T) helper {
	h := helper{t: t, dir: t.TempDir()}
	script := fmt.Sprintf("#!/bin/sh\nprintf '%%s\\n' \"$@\" > %[1]s/args\necho run >> %[1]s/count\ncat %[1]s/token\n", h.dir)
	if err := os.WriteFile(h.path(), []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h helper) path() string { return filepath.Join(h.dir, "helper") }

func (h helper) prints(tok string) {
	if err := os.WriteFile(filepath.Join(h.dir, "token"), []byte(tok+"\n"), 0o600); err != nil {
		h.t.Fatal(err)
	}
}

func (h helper) runs() int {
	b, _ := os.ReadFile(filepath.Join(h.dir, "count"))
	return strings.Count(string(b), "run")
}

// fakeJWT is a token whose payload has exp (not signed: the client only
// reads exp).
func fakeJWT(exp time.Time, tag string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc(fmt.Appendf(nil, `{"exp":%d,"sub":%q}`, exp.Unix(), tag)) + ".c2ln"
}

func bearerOf(t *testing.T, tok *Token) (string, error) {
	t.Helper()
	md, err := tok.GetRequestMetadata(context.Background())
	return strings.TrimPrefix(md["authorization"], "Bearer "), err
}

func TestTokenCommandCachesUntilExp(t *testing.T) {
	h := newHelper(t)
	cache := t.TempDir()
	// An argument a shell would split and run: it must arrive as is.
	odd := "a b; touch " + filepath.Join(h.dir, "pwned")
	argv := []string{h.path(), "--audience", odd}
	long := fakeJWT(time.Now().Add(time.Hour), "long")
	h.prints(long)
	tok := CommandToken(argv, cache)
	for range 2 {
		if got, err := bearerOf(t, tok); err != nil || got != long {
			t.Fatalf("token: %q %v", got, err)
		}
	}
	if n := h.runs(); n != 1 {
		t.Errorf("the helper ran %d times for one token, want 1", n)
	}
	if b, _ := os.ReadFile(filepath.Join(h.dir, "args")); string(b) != "--audience\n"+odd+"\n" {
		t.Errorf("argv reached the helper as %q", b)
	}
	if _, err := os.Stat(filepath.Join(h.dir, "pwned")); err == nil {
		t.Error("an argument ran as a shell command")
	}
	files, _ := filepath.Glob(filepath.Join(cache, "*.json"))
	if len(files) != 1 {
		t.Fatalf("cache files: %v", files)
	}
	if fi, err := os.Stat(files[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("cache file mode: %v %v", fi, err)
	}
	// A later process (a new Token) reads the cache: no run.
	if got, err := bearerOf(t, CommandToken(argv, cache)); err != nil || got != long || h.runs() != 1 {
		t.Errorf("from the cache: %q %v, runs %d", got, err, h.runs())
	}
	// Another command is another cache entry.
	if _, err := bearerOf(t, CommandToken(append(argv, "x"), cache)); err != nil || h.runs() != 2 {
		t.Errorf("another argv: %v, runs %d", err, h.runs())
	}
	// A token within a minute of its exp is fetched again on each use.
	soon := fakeJWT(time.Now().Add(30*time.Second), "soon")
	h.prints(soon)
	short := CommandToken([]string{h.path(), "short"}, cache)
	for i := range 2 {
		if got, err := bearerOf(t, short); err != nil || got != soon || h.runs() != 3+i {
			t.Errorf("near its exp (use %d): %q %v, runs %d", i, got, err, h.runs())
		}
	}
	// A token without exp (not a JWT) is kept in memory, never on disk.
	h.prints("opaque-token")
	opaque := CommandToken([]string{h.path(), "opaque"}, t.TempDir())
	for range 2 {
		if got, err := bearerOf(t, opaque); err != nil || got != "opaque-token" {
			t.Errorf("opaque: %q %v", got, err)
		}
	}
	if h.runs() != 5 {
		t.Errorf("runs %d, want 5", h.runs())
	}
}

func TestTokenCommandFailures(t *testing.T) {
	h := newHelper(t)
	for _, tc := range []struct {
		name, out string
		argv      []string
		want      string
	}{
		{"fails", "", []string{"/bin/false"}, "token-command /bin/false failed"},
		{"missing", "", []string{filepath.Join(h.dir, "nope")}, "failed"},
		{"prints nothing", "", []string{h.path()}, "must print one token"},
		{"prints two lines", "a\nb", []string{h.path()}, "must print one token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.prints(tc.out)
			_, err := bearerOf(t, CommandToken(tc.argv, ""))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "Unauthenticated") {
				t.Errorf("got %v, want an UNAUTHENTICATED error saying %q", err, tc.want)
			}
		})
	}
}
