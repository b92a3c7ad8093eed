package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
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

// Letting go of a session with native sessions appends to the state's
// journal: it rewrote the whole state file, every session's record, so
// draining a node of thousands of sessions wrote the state thousands of
// times over. What a restarted node loads is the same.
func TestReleaseAppendsToTheJournal(t *testing.T) {
	dir, home := t.TempDir(), t.TempDir()
	st, err := loadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	const kept, released = 2000, 100
	gone := filepath.Join(home, "gone.jsonl") // released earlier, file deleted since
	if err := st.update(func(m map[string]*owned) {
		for i := range kept {
			id := fmt.Sprint("s", i)
			m[id] = &owned{Agent: "claude", Cwd: home, Native: map[string]*nativeSession{"claude": {ID: "n" + id, Path: filepath.Join(home, id+".jsonl")}}}
		}
		st.Released = map[string]releasedNative{"claude#old": {Agent: "claude", ID: "old", Path: gone, Session: "s-old"}}
	}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "state.json")
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range released { // a released record goes with its file
		if err := os.WriteFile(filepath.Join(home, fmt.Sprint("s", i, ".jsonl")), []byte("{}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d := &Daemon{st: st}
	for i := range released {
		d.forget(fmt.Sprint("s", i))
	}
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) || after.Size() != before.Size() {
		t.Fatalf("%d releases rewrote the state file (%d bytes before, %d after)", released, before.Size(), after.Size())
	}
	restarted, err := loadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(restarted.Sessions); got != kept-released {
		t.Fatalf("restarted with %d sessions, want %d", got, kept-released)
	}
	if _, ok := restarted.Released["claude#old"]; ok {
		t.Fatal("the released session whose file is gone came back after a restart")
	}
	c := adoptCast{a: &Daemon{st: restarted}}
	for i := range kept {
		id := fmt.Sprint("s", i)
		if got, want := c.Runs("claude", filepath.Join(home, id+".jsonl"), ""), true; got != want {
			t.Fatalf("restarted node: %s's native file Runs = %v, want %v", id, got, want)
		}
	}
}

// A session's native session that a later turn replaced (a rebuild after a
// failed turn, a new folder) is still cast's, also after a restart: the
// node forgot it, and adoption listed the file left behind as a new
// session holding a copy of the session's early history.
func TestReplacedNativeStaysCasts(t *testing.T) {
	dir, home := t.TempDir(), t.TempDir()
	old, newer := filepath.Join(home, "n1.jsonl"), filepath.Join(home, "n2.jsonl")
	st, err := loadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	steps := []func(o *owned){
		func(o *owned) {
			o.Native = map[string]*nativeSession{"claude": {ID: "n1", Path: old}, "opencode": {ID: "ses_1"}}
		},
		func(o *owned) { o.Native["claude"] = &nativeSession{ID: "n2", Path: newer} }, // a turn's new native
		func(o *owned) { o.Native = nil },                                             // its folder moved
	}
	for i, step := range steps {
		if err := st.assign("s1", step); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	restarted, err := loadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, node := range []struct {
		name string
		st   *state
	}{{"running", st}, {"restarted", restarted}} {
		c := adoptCast{a: &Daemon{st: node.st}}
		for _, tt := range []struct {
			agent, path, id string
			want            bool
		}{
			{"claude", old, "", true},
			{"claude", newer, "", true},
			{"opencode", "", "ses_1", true},
			{"claude", filepath.Join(home, "mine.jsonl"), "", false},
		} {
			if got := c.Runs(tt.agent, tt.path, tt.id); got != tt.want {
				t.Errorf("%s node: Runs(%s, %q, %q) = %v, want %v", node.name, tt.agent, tt.path, tt.id, got, tt.want)
			}
		}
	}
	// Let go of, its replaced natives are released with it.
	(&Daemon{st: restarted}).forget("s1")
	if c := (adoptCast{a: &Daemon{st: restarted}}); !c.Runs("opencode", "", "ses_1") {
		t.Error("a replaced native session was forgotten with its session")
	}
}

// A workspace move (`cast workspace set`, `cast worktree rm` moving its
// threads back) starts the session's agents afresh in the new folder; the
// native sessions it ran in the old one are still cast's, also after a
// restart. moveSessions dropped them unrecorded, and a dev control plane
// restarted after `cast workspace set --worktree` and `--root` adopted the
// session's earlier Claude and Codex transcripts as new sessions in `cast ls`.
func TestWorkspaceMoveKeepsNativeCasts(t *testing.T) {
	dir, home := t.TempDir(), t.TempDir()
	old := filepath.Join(home, "n1.jsonl")
	st, err := loadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.assign("s1", func(o *owned) {
		o.Cwd = home
		o.Native = map[string]*nativeSession{"claude": {ID: "n1", Path: old}, "opencode": {ID: "ses_1"}}
	}); err != nil {
		t.Fatal(err)
	}
	a := &Daemon{st: st}
	moves := []*castv1.WorkspaceMove{{SessionId: "s1", Cwd: filepath.Join(home, "wt"), WorktreeBranch: "feature/x", Checkout: home}}
	if err := a.moveSessions(t.Context(), moves, func(context.Context, []*castv1.WorkspaceMove) error { return nil }); err != nil {
		t.Fatal(err)
	}
	// Restarted: the node's record of the CLIs it ran is gone, its state
	// is all that says whose the files are.
	restarted, err := loadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := adoptCast{a: &Daemon{st: restarted}}
	if !c.Runs("claude", old, "") || !c.Runs("opencode", "", "ses_1") {
		t.Error("restarted node: the natives run before the move are not cast's any more (Runs false)")
	}
	if o := restarted.Sessions["s1"]; o == nil || o.Native != nil || o.Cwd != filepath.Join(home, "wt") {
		t.Errorf("restarted node: s1 after the move = %+v, want no native session, in the new folder", o)
	}
}
