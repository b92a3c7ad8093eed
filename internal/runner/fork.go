package runner

import (
	"fmt"
	"os"

	"github.com/cast-dev/cast/internal/agents"
)

// forkSource resolves the session a fork turn copies. A source that is
// not there fails the turn before anything runs (ReasonNoSession), so a
// caller can fall back to another way of building the history.
func (d *driver) forkSource() error {
	// The agents whose CLI forks headless in a form the runner drives
	// (Commands.RunnerFork: `claude -p --resume ID --fork-session
	// --session-id NEW`, `codex exec fork ID`, `opencode run --session ID
	// --fork`) make a new session with the history and leave the original
	// as it was (Codex's new rollout reads the history from the original's
	// instead of copying it).
	if !d.a.Commands.RunnerFork || d.a.Commands.Fork == nil {
		return &Error{Reason: ReasonUnsupported, Detail: d.a.DisplayName + " has no headless fork the runner drives"}
	}
	d.forkID, d.forkPath = d.t.ForkOf, d.t.ForkPath
	if st, ok := d.ad.(agents.StoreDriver); ok {
		// `opencode run --session ID --fork` copies the session's rows into
		// a new session in the same store and names it in its JSON events,
		// as a fresh run does; a source that is not in the store fails the
		// run before the prompt is taken.
		d.forkPath, d.fresh = st.StorePath(d.home), true
		if d.forkID == "" || !exists(d.forkPath) {
			return &Error{Reason: ReasonNoSession, Detail: fmt.Sprintf("no %s session %q to fork under %s", d.a.Name, d.forkID, d.home)}
		}
		return nil
	}
	if d.forkPath == "" {
		d.forkPath = d.find(d.forkID)
	}
	if d.forkID == "" {
		d.forkID = d.ad.SessionID(d.forkPath)
	}
	if d.forkID == "" || d.forkPath == "" || !exists(d.forkPath) {
		return &Error{Reason: ReasonNoSession, Detail: fmt.Sprintf("no %s session %q to fork under %s", d.a.Name, d.forkID, d.home)}
	}
	return nil
}

// baselineFrom accounts for the forked session's messages. Claude's fork
// file starts with its copy of them; Codex's (0.171.0) holds only the new
// entries and points at the source by forked_from_id. Either way the
// neutral copy already has them, so the leading entries of the new file
// that repeat them in order are skipped (see skipForked), and the rest is
// new.
func (tl *tailer) baselineFrom(path string) {
	msgs, err := tl.reader.Read(path)
	if err != nil {
		tl.logf("runner: fork baseline read %s: %v", path, err)
		return
	}
	tl.forked = make([]string, len(msgs))
	for i, m := range msgs {
		tl.forked[i] = fingerprint(m)
	}
}

// skipForked reports whether an entry about to be emitted is the next one
// of the forked history; the first that is not ends the copy.
func (tl *tailer) skipForked(fp string) bool {
	if tl.forkedAt < len(tl.forked) && tl.forked[tl.forkedAt] == fp {
		tl.forkedAt++
		return true
	}
	tl.forkedAt = len(tl.forked)
	return false
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
