package adopt

import (
	"context"
	"fmt"

	"github.com/cast-dev/cast/internal/agents"
)

// followRuns adopts the subagents' runs a session's file keeps inside it
// (agents.RunsReader: older Claude Code's sidechain records, the run pi's
// subagent extension keeps in its tool result) as workers of the cast
// session keeping the file, each followed as a file of its own under the
// name path#run-<call> (its messages kept once by their digests). The file
// is read for runs only when what it added (added) may hold one.
func (f *Follower) followRuns(ctx context.Context, agent, path string, parent *fileState, added []byte) (int, error) {
	r, err := agents.ReaderFor(agent)
	if err != nil || parent.SessionID == "" {
		return 0, nil
	}
	if rr, ok := r.(agents.RunsReader); !ok || !rr.MayHoldRuns(added) {
		return 0, nil
	}
	runs, err := agents.ReadRuns(r, path)
	if err != nil {
		return 0, err
	}
	total := 0
	for i, run := range runs {
		key := fmt.Sprintf("run-%d", i+1)
		if run.CallID != "" {
			key = "run-" + run.CallID
		}
		rpath := path + "#" + key
		st := f.st.get(rpath)
		if st == nil {
			st = &fileState{Agent: agent, NativeID: parent.NativeID + "#" + key, Sent: map[string]int{}}
		}
		n, err := f.send(ctx, agent, origin{Key: rpath, Path: rpath, Cwd: cwdOf(agent, path), ParentSessionID: parent.SessionID, CallID: run.CallID}, st, unsent(st.Sent, map[string]int{}, run.Messages))
		if total += n; err != nil {
			return total, err
		}
		if err := f.st.put(rpath, st); err != nil {
			return total, err
		}
	}
	return total, nil
}
