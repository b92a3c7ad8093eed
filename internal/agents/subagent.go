package agents

import "github.com/cast-dev/cast/internal/transcript"

// Subagent is what a native file says of itself when it holds only a
// subagent's run (a Claude sidechain file, a Codex thread another thread
// spawned, a Gemini subagent session): the agent's name for such a run,
// and the parent's native session id and the parent's tool call that
// started it, each "" where the file does not say.
type Subagent struct {
	Kind           string `json:"kind"`
	ParentNativeID string `json:"parent_native_id,omitempty"`
	CallID         string `json:"call_id,omitempty"`
}

// SubagentReader is a Reader that can tell a file holding only a
// subagent's run from a session of its own: `cast import` says so, and
// imports it as a worker of the parent it is given. ok is false for a
// session of its own.
type SubagentReader interface {
	ReadSubagent(path string) (s Subagent, ok bool, err error)
}

// ReadSubagent is r.ReadSubagent where r can tell; false otherwise.
func ReadSubagent(r Reader, path string) (Subagent, bool, error) {
	if sr, ok := r.(SubagentReader); ok {
		return sr.ReadSubagent(path)
	}
	return Subagent{}, false, nil
}

// Run is a subagent's run that a session's own file keeps beside its main
// chain (older Claude Code's sidechain records), read as a conversation of
// its own.
type Run struct {
	Subagent
	Messages []transcript.Message
	// Kept are the left-out counts of the session's report (ReadReport's
	// skipped, by kind) that this run holds: kept as a worker, they are
	// no longer left out.
	Kept map[string]int
	// Skipped is what reading the run left out, by kind.
	Skipped map[string]int
}

// RunsReader is a Reader whose session files can hold subagents' runs
// beside the main chain, which Read leaves out: `cast import` keeps each
// run as a worker of the imported session, so none is lost.
type RunsReader interface {
	ReadRuns(path string) ([]Run, error)
	// MayHoldRuns says, cheaply, whether data (a session file, or what it
	// grew by) may hold a run, so a follower reads runs again only then.
	MayHoldRuns(data []byte) bool
}

// ReadRuns is r.ReadRuns where r keeps runs inside a session's file; nil
// otherwise.
func ReadRuns(r Reader, path string) ([]Run, error) {
	if rr, ok := r.(RunsReader); ok {
		return rr.ReadRuns(path)
	}
	return nil, nil
}
