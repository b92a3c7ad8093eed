package node

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/statefile"
	"github.com/cast-dev/cast/internal/validate"
)

// A held turn is woken after a failed state write whichever writer's
// write succeeds next: the CI failure this guards against had another
// update write the file first, so recordAgain saw nothing to catch up and
// the session slept forever.
func TestStateRecoveryIsReportedOnceWhoeverWrites(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "gone")
	st, err := loadState(gone)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(gone); err != nil { // a write there fails for real (ENOENT)
		t.Fatal(err)
	}
	if err := st.update(func(m map[string]*owned) { m["s"] = &owned{ReceivedSeq: 3} }); err == nil {
		t.Fatal("a write into a missing dir succeeded")
	}
	if !st.behind() {
		t.Fatal("a failed write is not reported as behind")
	}
	if now, err := st.catchUp(); err == nil || now {
		t.Fatalf("catchUp while writes fail = %v, %v; want an error", now, err)
	}
	if err := os.Mkdir(gone, 0o700); err != nil {
		t.Fatal(err)
	}
	// Another writer gets there first.
	if err := st.update(func(m map[string]*owned) { m["s"].DeliveredSeq = 1 }); err != nil {
		t.Fatal(err)
	}
	if st.behind() {
		t.Fatal("still behind after a good write")
	}
	tests := []struct {
		name string
		want bool
	}{
		{"first catchUp after the recovery", true},
		{"second catchUp", false},
	}
	for _, tt := range tests {
		now, err := st.catchUp()
		if err != nil || now != tt.want {
			t.Fatalf("%s = %v, %v; want %v", tt.name, now, err, tt.want)
		}
	}
}

// A resync assigns every owned session again: a record that did not
// change writes nothing, a change appends that session's record alone,
// and a restarted node loads what was written.
func TestStateWritesOnlyWhatChanged(t *testing.T) {
	dir := t.TempDir()
	st, err := loadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	assign := func(id string) error {
		return st.assign(id, func(o *owned) { o.Token, o.Agent, o.Cwd = max(o.Token, 4), "claude", "/src" })
	}
	for _, id := range []string{"s0", "s1", "s2"} {
		if err := assign(id); err != nil {
			t.Fatal(err)
		}
	}
	journal := statefile.JournalPath(filepath.Join(dir, "state.json"))
	size := func() int64 {
		info, err := os.Stat(journal)
		if err != nil {
			t.Fatal(err)
		}
		return info.Size()
	}
	steps := []struct {
		name   string
		do     func() error
		writes bool
	}{
		{"an assignment as it was", func() error { return assign("s0") }, false},
		{"a change to one session", func() error { return st.session("s1", func(o *owned) { o.ReceivedSeq = 5 }) }, true},
		{"a change to a session the node lacks", func() error { return st.session("gone", func(o *owned) { o.ReceivedSeq = 1 }) }, false},
		{"a removal", func() error { return st.remove("s2") }, true},
		{"a removal of what is gone", func() error { return st.remove("s2") }, false},
	}
	for _, s := range steps {
		before := size()
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		grown := size() - before
		if s.writes != (grown > 0) || grown > 512 {
			t.Fatalf("%s: the journal grew %d bytes", s.name, grown)
		}
	}
	again, err := loadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := again.ids(); len(got) != 2 || again.Sessions["s1"].ReceivedSeq != 5 || again.Sessions["s0"].Token != 4 {
		t.Fatalf("a restarted node loaded %v: %+v", got, again.Sessions)
	}
}

// A node owning more sessions than the control plane takes in one hello
// (validate.MaxHelloSessions) could never connect: its hello was refused at
// every try. It lists that many, a window that moves on at each connect,
// so every session it believes it owns is checked across connects.
func TestHelloOfANodeOwningPastTheBoundIsTaken(t *testing.T) {
	st, err := loadState(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	n := validate.MaxHelloSessions + 3
	for i := range n {
		st.Sessions[fmt.Sprintf("s%06d", i)] = &owned{Token: 1}
	}
	a := &Daemon{st: st, lg: zap.NewNop()}
	seen := map[string]bool{}
	for range 2 {
		ids := a.helloSessions()
		if len(ids) > validate.MaxHelloSessions {
			t.Fatalf("the hello lists %d sessions; the control plane takes at most %d", len(ids), validate.MaxHelloSessions)
		}
		for _, id := range ids {
			seen[id] = true
		}
	}
	if len(seen) != n {
		t.Fatalf("two hellos listed %d of the node's %d sessions; each should be checked", len(seen), n)
	}
}
