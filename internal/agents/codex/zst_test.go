package codex

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// A rollout Codex compressed after a week idle (rollout-….jsonl.zst) is
// found by its id and reads as the plain file does; where Codex has
// materialized it again, the plain file wins.
func TestCompressedRolloutFoundAndRead(t *testing.T) {
	const id = "0199a213-81c0-7800-8aa1-bbab2a035a53"
	plain, err := os.ReadFile("testdata/examples/codex_rollout_2turn_with_tool.trimmed.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	dir := filepath.Join(home, "sessions", "2026", "11", "20")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	zst := filepath.Join(dir, "rollout-2026-11-20T10-00-00-"+id+".jsonl.zst")
	if err := os.WriteFile(zst, enc.EncodeAll(plain, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	d := Driver{}
	if got := d.FindSession(home, id); got != zst {
		t.Fatalf("FindSession: %q, want the compressed rollout %q", got, zst)
	}
	if got := d.SessionID(zst); got != id {
		t.Fatalf("SessionID of the compressed name: %q, want %q", got, id)
	}
	fromZst, err := Reader{}.Read(zst)
	if err != nil {
		t.Fatal(err)
	}
	plainPath := filepath.Join(t.TempDir(), "plain.jsonl")
	if err := os.WriteFile(plainPath, plain, 0o600); err != nil {
		t.Fatal(err)
	}
	fromPlain, err := Reader{}.Read(plainPath)
	if err != nil {
		t.Fatal(err)
	}
	if len(fromPlain) < 4 || !reflect.DeepEqual(fromZst, fromPlain) {
		t.Fatalf("the compressed rollout read as %d messages, the plain one as %d (want equal, at least 4)", len(fromZst), len(fromPlain))
	}
	materialized := filepath.Join(dir, "rollout-2026-11-20T10-00-00-"+id+".jsonl")
	if err := os.WriteFile(materialized, plain, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := d.FindSession(home, id); got != materialized {
		t.Fatalf("FindSession with both: %q, want the plain %q", got, materialized)
	}
	if err := os.WriteFile(zst, []byte("not zstd"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (Reader{}).Read(zst); err == nil {
		t.Fatal("a corrupt .zst read without an error")
	}
}
