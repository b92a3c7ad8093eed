package agents

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
