package agents

import (
	"context"
	"path/filepath"
	"sort"
)

// SessionLister is a Driver whose native sessions are one file each under
// the agent's own folder, so a node can find every one of them, including
// those the user ran in the agent directly, and keep them (internal/adopt).
// Agents whose sessions live in a store of their own (OpenCode's SQLite)
// do not list files.
type SessionLister interface {
	// SessionFiles are the patterns (filepath.Glob, under home) of the
	// agent's session transcripts, one file per session: the sessions'
	// own first, then the subagents' runs the agent keeps beside them
	// (Claude's <session>/subagents/, Gemini's chats/<session>/), which
	// read as runs (SubagentReader) naming their parent.
	SessionFiles(home string) []string
}

// NativeSessions lists the native session files of agent under home (the
// agent's own folder), each pattern's files sorted, in the patterns'
// order: a parent session comes before the subagents' runs kept beside
// it, so adoption has kept the parent when a run of it comes; false when
// its driver cannot list them.
func NativeSessions(agent, home string) ([]string, bool) {
	l, ok := DriverAs[SessionLister](agent)
	if !ok {
		return nil, false
	}
	var out []string
	for _, pat := range l.SessionFiles(home) {
		m, _ := filepath.Glob(pat) // the patterns are the driver's own: never malformed
		sort.Strings(m)
		out = append(out, m...)
	}
	return out, true
}

// Listers are the agents whose drivers list their native sessions (files
// or a store's rows), sorted.
func Listers() []string {
	var out []string
	for _, n := range Names() {
		a, _ := Lookup(n)
		if d, ok := a.Driver(); ok {
			_, files := d.(SessionLister)
			_, rows := d.(StoreLister)
			if files || rows {
				out = append(out, n)
			}
		}
	}
	return out
}

// StoredSession is one session in an agent's own store (StoreLister).
type StoredSession struct {
	ID  string
	Cwd string // the folder it ran in
	// ParentID is the session that spawned it ("" for a session of its
	// own): a subagent's run (OpenCode's task tool).
	ParentID string
	// Version changes whenever the session does (its rows' times and
	// count): unchanged, it holds nothing new.
	Version string
}

// StoreLister is a StoreDriver that lists the sessions in its store, so a
// node can adopt those the user ran in the agent directly, reading only
// (directly, or through the agent's own CLI: bin, env, as a turn runs
// it). home is the agent's own folder; a store not made yet lists nothing.
type StoreLister interface {
	StoreDriver
	StoredSessions(ctx context.Context, bin string, env []string, home string) ([]StoredSession, error)
	// StoreStamp is a cheap mark of the store's state under home, read
	// from its files with no process started, that changes whenever a
	// listing could: a listing reads the store and each session whose
	// version moved is read whole (Export), and a node looks every few
	// seconds, so it lists again only when the mark moved. "" means it
	// cannot tell: list.
	StoreStamp(home string) string
}
