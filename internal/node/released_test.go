package node

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// A native session cast ran for a session this node has let go of (moved
// to another node, archived, dropped) is still cast's, also after a
// restart: adoption took the file left behind for a session the user ran
// and listed a copy of the session's history as a new session. The record
// of it goes once the file does, so it does not grow for ever.
func TestReleasedSessionsNativeStaysCasts(t *testing.T) {
	dir, home := t.TempDir(), t.TempDir()
	file := filepath.Join(home, "n1.jsonl")
	if err := os.WriteFile(file, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := loadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	natives := map[string]map[string]*nativeSession{
		"s1": {"claude": {ID: "n1", Path: file}},
		"s2": {"opencode": {ID: "ses_2"}},
		"s3": {"claude": {ID: "n3", Path: filepath.Join(home, "n3.jsonl")}},
	}
	for id, n := range natives {
		if err := st.assign(id, func(o *owned) { o.Native = n }); err != nil {
			t.Fatal(err)
		}
	}
	d := &Daemon{st: st}
	for _, id := range []string{"s1", "s2"} {
		d.forget(id)
	}
	restarted, err := loadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name            string
		agent, path, id string
		want            bool
	}{
		{"a released file, by path", "claude", file, "", true},
		{"a released store session, by id", "opencode", "", "ses_2", true},
		{"another agent's session of that id", "codex", "", "n1", false},
		{"a file cast never ran", "claude", filepath.Join(home, "mine.jsonl"), "", false},
	}
	for _, node := range []struct {
		name string
		st   *state
	}{{"running", st}, {"restarted", restarted}} {
		c := adoptCast{a: &Daemon{st: node.st}}
		for _, tt := range tests {
			if got := c.Runs(tt.agent, tt.path, tt.id); got != tt.want {
				t.Errorf("%s node, %s: Runs = %v, want %v", node.name, tt.name, got, tt.want)
			}
		}
	}
	// s3's file is gone: its record is not kept, and a file of a
	// released session that is gone meanwhile is dropped at the next
	// release.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	d = &Daemon{st: restarted}
	d.forget("s3")
	if got := len(restarted.Released); got != 1 { // ses_2's: a store's session has no file of its own
		t.Fatalf("%d released native sessions kept, want 1: %v", got, restarted.Released)
	}
}

// Past maxReleased the oldest released native sessions go first: a store
// agent's have no file to see gone.
func TestReleasedKeepsTheNewest(t *testing.T) {
	st := &state{Released: map[string]releasedNative{}}
	for i := range maxReleased + 2 {
		id := fmt.Sprint("ses_", i)
		st.Released["opencode#"+id] = releasedNative{Agent: "opencode", ID: id, Session: "s", At: int64(i)}
	}
	st.pruneReleased()
	_, oldest := st.Released["opencode#ses_1"]
	_, newest := st.Released[fmt.Sprint("opencode#ses_", maxReleased+1)]
	if len(st.Released) != maxReleased || oldest || !newest {
		t.Fatalf("%d kept, the second oldest %v, the newest %v", len(st.Released), oldest, newest)
	}
}
