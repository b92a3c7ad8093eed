package delivery

// Row is the native session row kept per (session, agent): which native
// session caches the neutral transcript, where it lives, and up to which seq
// it holds every row. Its methods return the next Row and never change the
// receiver, so the store can compare and swap.
//
// The order of bookkeeping is the point:
//
//   - nothing is recorded before the turn: a prompt the runtime refused
//     (binary missing, not logged in) leaves the row as it was, so the retry
//     makes the same transition and still carries the handoff;
//   - Accepted records the native session once the runtime took the prompt;
//   - Stored moves KnownUpto forward with max() as the reply is stored, so
//     it never goes back and the next delta never echoes the agent's own
//     answer.
type Row struct {
	NativeID  string `json:"native_id"`
	Node      string `json:"node,omitempty"`
	Path      string `json:"path,omitempty"`
	KnownUpto int64  `json:"known_upto_seq"` // every seq up to here is in the native session
}

// Recorded reports whether r names a native session.
func (r Row) Recorded() bool { return r.NativeID != "" }

// Accepted is the row after the runtime accepted a prompt. nativeID, node
// and path are what the runtime reports ("" keeps the recorded value);
// through is the last seq the native session now holds: the prompt's own
// seq, since the rebuilt transcript, the delta or the slice and the prompt
// all went in with it.
//
// A different native id is a different native session (a rebuild, or a
// fresh one the CLI minted): the old KnownUpto says nothing about it and is
// replaced. The same id moves KnownUpto forward with max().
func (r Row) Accepted(nativeID, node, path string, through int64) Row {
	if nativeID == "" {
		nativeID = r.NativeID
	}
	if nativeID == "" {
		return r // nothing to record
	}
	if nativeID != r.NativeID {
		return Row{NativeID: nativeID, Node: node, Path: path, KnownUpto: max(through, 0)}
	}
	next := r
	if node != "" {
		next.Node = node
	}
	if path != "" {
		next.Path = path
	}
	next.KnownUpto = max(r.KnownUpto, through)
	return next
}

// Refused is the row after the runtime refused the prompt: unchanged, so
// nothing is marked as seen. It exists to make call sites say so.
func (r Row) Refused() Row { return r }

// Stored is the row after a reply row with this seq was stored: KnownUpto
// moves forward, never back. A row that was never recorded (the prompt was
// refused) stays unrecorded.
func (r Row) Stored(seq int64) Row {
	if !r.Recorded() {
		return r
	}
	r.KnownUpto = max(r.KnownUpto, seq)
	return r
}
