package secrets

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func newBox(t *testing.T, fill byte) *Box {
	t.Helper()
	b, err := NewBox(bytes.Repeat([]byte{fill}, KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	b := newBox(t, 1)
	for _, pt := range [][]byte{nil, []byte("x"), []byte("sk-ant-0123456789abcdef"), bytes.Repeat([]byte("z"), 1<<16)} {
		sealed, err := b.Seal(pt, []byte("claude/work"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := b.Open(sealed, []byte("claude/work"))
		if err != nil {
			t.Fatalf("open %d bytes: %v", len(pt), err)
		}
		if !bytes.Equal(got, pt) {
			t.Fatalf("round trip of %d bytes gave %d bytes", len(pt), len(got))
		}
	}
}

func TestSealFreshNonceAndHidesPlaintext(t *testing.T) {
	b := newBox(t, 1)
	pt := []byte("sk-ant-api03-very-secret-token")
	s1, _ := b.Seal(pt, nil)
	s2, _ := b.Seal(pt, nil)
	if bytes.Equal(s1, s2) {
		t.Fatal("two seals of the same plaintext are identical")
	}
	if bytes.Equal(s1[1:13], s2[1:13]) {
		t.Fatal("nonce reused")
	}
	for _, s := range [][]byte{s1, s2} {
		if s[0] != 1 {
			t.Fatalf("version byte %d, want 1", s[0])
		}
		if bytes.Contains(s, pt) || bytes.Contains(s, pt[:8]) {
			t.Fatal("plaintext appears in sealed output")
		}
	}
}

func TestOpenFailures(t *testing.T) {
	b := newBox(t, 1)
	pt := []byte("hunter2-secret")
	aad := []byte("claude/work")
	sealed, err := b.Seal(pt, aad)
	if err != nil {
		t.Fatal(err)
	}
	mod := func(f func(s []byte) []byte) []byte { return f(bytes.Clone(sealed)) }
	tests := []struct {
		name   string
		box    *Box
		sealed []byte
		aad    []byte
	}{
		{"wrong key", newBox(t, 2), sealed, aad},
		{"wrong aad", b, sealed, []byte("claude/home")},
		{"no aad", b, sealed, nil},
		{"flipped version", b, mod(func(s []byte) []byte { s[0] = 2; return s }), aad},
		{"flipped nonce", b, mod(func(s []byte) []byte { s[1] ^= 1; return s }), aad},
		{"flipped ciphertext", b, mod(func(s []byte) []byte { s[13] ^= 1; return s }), aad},
		{"flipped tag", b, mod(func(s []byte) []byte { s[len(s)-1] ^= 1; return s }), aad},
		{"truncated by one", b, sealed[:len(sealed)-1], aad},
		{"header only", b, sealed[:13], aad},
		{"empty", b, nil, aad},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.box.Open(tc.sealed, tc.aad)
			if !errors.Is(err, ErrOpen) {
				t.Fatalf("err = %v, want ErrOpen", err)
			}
			if got != nil {
				t.Fatal("returned data on failure")
			}
			if strings.Contains(err.Error(), string(pt)) {
				t.Fatal("error contains plaintext")
			}
		})
	}
}

func TestNewBoxKeySize(t *testing.T) {
	for _, n := range []int{0, 16, 24, 31, 33} {
		if _, err := NewBox(make([]byte, n)); err == nil {
			t.Errorf("NewBox accepted a %d-byte key", n)
		}
	}
}

func TestConcurrentSeal(t *testing.T) {
	b := newBox(t, 1)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			aad := []byte{byte(i)}
			s, err := b.Seal([]byte("v"), aad)
			if err == nil {
				_, err = b.Open(s, aad)
			}
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

func TestLoadOrCreateKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "dir", "secret.key")
	k1, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(k1) != KeySize {
		t.Fatalf("key is %d bytes", len(k1))
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %04o, want 0600", st.Mode().Perm())
	}
	if st, _ := os.Stat(filepath.Dir(path)); st.Mode().Perm() != 0o700 {
		t.Fatalf("key dir mode %04o, want 0700", st.Mode().Perm())
	}
	k2, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	k3, err := LoadKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(k1, k2) || !bytes.Equal(k1, k3) {
		t.Fatal("second load returned a different key")
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Fatalf("left %d files in key dir, want 1", len(ents))
	}
}

// Processes racing to create the key must all end up with the one on disk.
// Many rounds with a start barrier, because a lost update only shows when
// one caller returns before another replaces the file.
func TestLoadOrCreateKeyRace(t *testing.T) {
	for round := range 30 {
		path := filepath.Join(t.TempDir(), "secret.key")
		keys := make([][]byte, 8)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range keys {
			wg.Go(func() {
				<-start
				k, err := LoadOrCreateKey(path)
				if err != nil {
					t.Error(err)
				}
				keys[i] = k
			})
		}
		close(start)
		wg.Wait()
		onDisk, err := LoadKey(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range keys {
			if !bytes.Equal(k, onDisk) {
				t.Fatalf("round %d: caller %d got a key that is not the one on disk", round, i)
			}
		}
	}
}

func TestLoadKeyMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret.key")
	if _, err := LoadKey(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want not-exist", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("LoadKey created the file")
	}
}

func TestLoadKeyRejects(t *testing.T) {
	good := strings.Repeat("ab", KeySize)
	tests := []struct {
		name    string
		content string
		mode    os.FileMode
		want    string
	}{
		{"group and other readable", good + "\n", 0o644, "chmod 600"},
		{"group readable", good, 0o640, "chmod 600"},
		{"too short", strings.Repeat("cd", KeySize-1) + "\n", 0o600, "malformed"},
		{"too long", good + "ef\n", 0o600, "malformed"},
		{"two newlines", good + "\n\n", 0o600, "malformed"},
		// hex's own error would quote the bad byte ('Q'); ours must not.
		{"not hex", strings.Repeat("ab", KeySize-1) + "Qz", 0o600, "not hex"},
		{"raw bytes", strings.Repeat("\x9c", KeySize), 0o600, "malformed"},
		{"empty", "", 0o600, "malformed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "secret.key")
			if err := os.WriteFile(path, []byte(tc.content), tc.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tc.mode); err != nil { // umask may have masked WriteFile's mode
				t.Fatal(err)
			}
			for _, load := range []func(string) ([]byte, error){LoadKey, LoadOrCreateKey} {
				_, err := load(path)
				if err == nil {
					t.Fatal("accepted")
				}
				msg := err.Error()
				if !strings.Contains(msg, tc.want) || !strings.Contains(msg, path) {
					t.Fatalf("error %q should contain %q and the path", msg, tc.want)
				}
				if c := strings.TrimSpace(tc.content); c != "" && (strings.Contains(msg, c) || strings.Contains(msg, c[len(c)-4:]) || strings.Contains(msg, "Q")) {
					t.Fatalf("error %q leaks file content", msg)
				}
			}
			// A refused file is left alone, not replaced.
			if got, _ := os.ReadFile(path); string(got) != tc.content {
				t.Fatal("key file was modified")
			}
		})
	}
}

func TestLoadKeyAcceptsStricterModeAndNoNewline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secret.key")
	if err := os.WriteFile(path, []byte(strings.Repeat("0F", KeySize)), 0o400); err != nil {
		t.Fatal(err)
	}
	k, err := LoadKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(k, bytes.Repeat([]byte{0x0f}, KeySize)) {
		t.Fatal("wrong key decoded")
	}
}
