package cli

import (
	"context"
	"fmt"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
)

// importedRun is a subagent's run split out of an imported file, as the
// import report gives it.
type importedRun struct {
	ID       string          `json:"id"`
	Subagent agents.Subagent `json:"subagent"`
	Messages int             `json:"messages"`
	Kept     map[string]int  `json:"kept"`
	Skipped  map[string]int  `json:"skipped"`
}

// importRuns keeps the subagents' runs the file holds beside its main
// chain (agents.RunsReader: older Claude Code's sidechain records) as
// workers of sess, rather than leaving them out: each is a nested session
// with the run as its conversation. What they keep is taken off skipped.
func (a *app) importRuns(ctx context.Context, c *client.Client, sess *castv1.Session, r agents.Reader, path string, skipped map[string]int) ([]importedRun, error) {
	runs, err := agents.ReadRuns(r, path)
	if err != nil {
		return nil, fmt.Errorf("read the subagents' runs in %s: %w", path, err)
	}
	var out []importedRun
	for i, run := range runs {
		reqID := ids.NewClientID()
		w, err := a.createSession(ctx, &castv1.CreateSessionRequest{
			Agent: sess.Agent, Cwd: sess.Cwd, Node: sess.Node, RequestId: reqID, ParentId: sess.Id, ParentCallId: run.CallID,
			Title: importTitle(run.Messages, fmt.Sprintf("%s run %d", run.Kind, i+1)), HistoryMessages: int64(len(run.Messages)),
		})
		if err != nil {
			return out, fmt.Errorf("session %s imported, but its subagent run %d of %d was not: %w", sess.Id, i+1, len(runs), err)
		}
		n, err := a.appendAll(ctx, w.Id, reqID, sess.Agent, run.Messages)
		if err != nil {
			return out, fmt.Errorf("worker %s created but its import stopped after %d of %d messages: %w", w.Id, n, len(run.Messages), err)
		}
		for kind, k := range run.Kept {
			if skipped[kind] -= k; skipped[kind] <= 0 {
				delete(skipped, kind)
			}
		}
		if run.Skipped == nil {
			run.Skipped = map[string]int{}
		}
		out = append(out, importedRun{ID: w.Id, Subagent: run.Subagent, Messages: n, Kept: keptKinds(run.Messages), Skipped: run.Skipped})
	}
	return out, nil
}

// parentCall is the call of parent that started the run an imported file
// holds, where the file says ("" without a parent).
func parentCall(parent string, isSub bool, sub agents.Subagent) string {
	if parent == "" || !isSub {
		return ""
	}
	return sub.CallID
}

// notice tells that a run the file held was kept as a worker.
func (w importedRun) notice(file, parent string) string {
	about := w.Subagent.Kind
	if w.Subagent.CallID != "" {
		about += ", started by tool call " + w.Subagent.CallID
	}
	s := fmt.Sprintf("%s held a subagent's run (%s): imported as worker %s of %s, %d messages", file, about, w.ID, parent, w.Messages)
	if len(w.Skipped) > 0 {
		s += "; skipped from it: " + countList(w.Skipped)
	}
	return s
}
