package node

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// The stores fleet accounts replace are kept so the user can go back to
// their own login: a store backed up again unchanged (a custody supply
// that failed, then the copy that followed it) is kept once, and however
// many fleet accounts replace the store later, the first copy (the user's
// own login, from before cast wrote it) is never pruned.
func TestBackupCredentialKeepsTheUsersLogin(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "home", ".credentials.json")
	backups := filepath.Join(dir, "backups")
	own := []byte(`{"user":"own login"}`)
	if err := os.MkdirAll(filepath.Dir(store), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(store, own, 0o600); err != nil {
		t.Fatal(err)
	}
	// A supply that backed up and then failed, and the copy after it.
	if _, err := backupCredential(store, nil, backups); err != nil {
		t.Fatal(err)
	}
	if _, err := writeCredential(store, []byte(`{"fleet":0}`), backups); err != nil {
		t.Fatal(err)
	}
	if got := listBackups(t, backups); len(got) != 1 {
		t.Fatalf("the unchanged store was backed up %d times, want once", len(got))
	}
	for i := 1; i <= 2*keepBackups; i++ {
		if _, err := writeCredential(store, []byte(fmt.Sprintf(`{"fleet":%d}`, i)), backups); err != nil {
			t.Fatal(err)
		}
	}
	got := listBackups(t, backups)
	if len(got) != keepBackups {
		t.Fatalf("%d backups, want %d", len(got), keepBackups)
	}
	if b, _ := os.ReadFile(got[0]); string(b) != string(own) {
		t.Fatalf("the oldest backup is %s, want the user's own login", b)
	}
	if b, _ := os.ReadFile(got[len(got)-1]); string(b) != fmt.Sprintf(`{"fleet":%d}`, 2*keepBackups-1) {
		t.Fatalf("the newest backup is %s, want the store the last write replaced", b)
	}
}

func listBackups(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, ".credentials.json.*"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(m)
	return m
}
