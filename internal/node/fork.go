package node

import (
	"context"
	"errors"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/agents"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/runner"
	"github.com/cast-dev/cast/internal/transcript"
)

// Fork paths, as logged in the "fork_path" field.
const (
	forkNative  = "native"
	forkRebuild = "rebuild"
)

// rebuildNativeID is the native id a rebuild of agent's session writes
// under (ns: the session's native row, nil if none). It is always a new id,
// so no existing file is rewritten in place, when the agent runs in the
// user's own folder (shared: the user may have resumed that session
// themselves) and for an agent whose forks read the source's file (not
// even one a lost row named: a stable id would find it again); the node
// replaces the row after the turn. Others keep the row's id ("" lets the
// writer pick one).
func rebuildNativeID(agent string, ns *nativeSession, shared bool) string {
	a, _ := agents.Lookup(agent)
	switch {
	case shared || a.Caps.ForkReadsSource:
		return agents.NewNativeID(agent)
	case ns != nil:
		return ns.ID
	}
	return ""
}

// forkCut is what decides a fork's first turn on this node.
type forkCut struct {
	Agent     string
	Parent    *nativeSession // the parent's native session for Agent here (nil: none)
	ParentCwd string
	Cwd       string
	ForkedAt  int64 // the fork's cut (ForkedAtSeq)
	Delivered int64 // the fork's DeliveredSeq on this node
	// AfterCut counts the rows between the cut and the turn's prompt other
	// than the fork notice: the parent's native session has none of them.
	AfterCut int
}

// nativeForkOK says whether the turn may fork the parent's native session
// instead of rebuilding the history: only when the cut is exactly the tip
// that native session has seen (a native fork copies all of it, and
// nothing newer than the cut may reach the fork) and the turn is the
// first after the cut. why says what failed, for the log.
func nativeForkOK(c forkCut) (ok bool, why string) {
	a, known := agents.Lookup(c.Agent)
	switch {
	case !known || a.Caps.NativeFork == agents.ForkNone || a.Commands.Fork == nil || !a.Commands.RunnerFork:
		return false, "agent has no native fork"
	case c.ForkedAt < 1:
		return false, "no cut"
	case c.Delivered != c.ForkedAt:
		return false, "not the fork's first turn"
	case c.AfterCut > 0:
		return false, "messages after the cut"
	case c.Parent == nil || c.Parent.ID == "":
		return false, "parent has no native session here"
	case c.Parent.Stale:
		return false, "parent's native session is stale"
	case c.Parent.KnownUpto != c.ForkedAt:
		return false, "cut is not the tip the parent's native session has seen"
	case !c.Parent.holdsUpTo(c.ForkedAt):
		return false, "parent's native session misses rows before the cut"
	case c.Cwd == "" || c.Cwd != c.ParentCwd:
		// The CLI finds a session by the project folder of its cwd.
		return false, "fork runs in another cwd"
	}
	return true, ""
}

// nativeForkTurn turns t into a native fork of the parent's native
// session when sessionID is a fork whose first turn runs here and
// nativeForkOK allows it. It is only asked for a session without a native
// session for its agent on this node. Any error reading the session means
// a rebuild.
func (a *Daemon) nativeForkTurn(ctx context.Context, sessionID string, o owned, firstSeq int64, account string, t runner.Turn) (runner.Turn, bool) {
	if o.DeliveredSeq < 1 {
		return t, false // a fork's first turn follows its copied history
	}
	sess, err := a.cli.Sessions.GetSession(ctx, &castv1.GetSessionRequest{SessionId: sessionID})
	if err != nil || sess.ParentId == "" || sess.ForkedAtSeq == 0 {
		return t, false // not a fork (or unknown): the usual paths
	}
	lg := a.lg.With(zap.String("session", sessionID), zap.String("agent", o.Agent), zap.String("parent", sess.ParentId),
		zap.Int64("forked_at", sess.ForkedAtSeq))
	c := forkCut{Agent: o.Agent, Cwd: o.Cwd, ForkedAt: sess.ForkedAtSeq, Delivered: o.DeliveredSeq}
	if c.AfterCut, err = a.afterCut(ctx, sessionID, sess.ForkedAtSeq, firstSeq); err != nil {
		lg.Warn("fork turn: reading the rows after the cut failed", zap.String("fork_path", forkRebuild), zap.Error(err))
		return t, false
	}
	if parent, ok := a.st.get(sess.ParentId); ok {
		c.Parent, c.ParentCwd = parent.Native[o.Agent], parent.Cwd
	}
	if c.Parent.boundElsewhere(o.Agent, account) {
		lg.Info("fork turn", zap.String("fork_path", forkRebuild), zap.String("why", "the parent's native session is bound to another fleet account"))
		return t, false
	}
	if ok, why := nativeForkOK(c); !ok {
		lg.Info("fork turn", zap.String("fork_path", forkRebuild), zap.String("why", why))
		return t, false
	}
	t.ForkOf, t.ForkPath = c.Parent.ID, c.Parent.Path
	lg.Info("fork turn", zap.String("fork_path", forkNative), zap.String("parent_native", c.Parent.ID))
	return t, true
}

// afterCut counts the rows after the cut and before the prompt that are
// not the fork notice (which says where the fork came from and is no
// history the agent missed).
func (a *Daemon) afterCut(ctx context.Context, sessionID string, cut, firstSeq int64) (int, error) {
	if firstSeq <= cut+1 {
		return 0, nil
	}
	resp, err := a.cli.Sessions.ListMessages(ctx, &castv1.ListMessagesRequest{SessionId: sessionID, StartSeq: cut + 1, EndSeq: firstSeq - 1})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range resp.Messages {
		if m.Kind != castv1.MessageKind_MESSAGE_KIND_NOTICE || m.NoticeType != transcript.NoticeFork {
			n++
		}
	}
	if resp.NextPageToken != "" {
		n++ // more than a page: certainly not just the notice
	}
	return n, nil
}

// forkDidNotRun says whether a native fork turn failed before the agent
// took the prompt, so a rebuild may run it instead: nothing was emitted
// and the fork has no session holding the prompt. An interrupt or a usage
// limit keeps its usual handling.
func forkDidNotRun(res runner.Result, err error) bool {
	var re *runner.Error
	if err == nil || !errors.As(err, &re) || res.Emitted > 0 {
		return false
	}
	switch re.Reason {
	case runner.ReasonInterrupted, runner.ReasonRateLimited:
		return false
	case runner.ReasonNoSession, runner.ReasonUnsupported:
		return true
	}
	return res.NativeID == "" || !res.PromptSeen
}

// rerunRebuilt runs a fork turn again on a rebuilt history after its
// native fork did not run: the fork never fails because of the native
// path. It returns the new run's outcome (a rebuild that could not be set
// up is rerunNotSetUp: the prompt is held).
func (a *Daemon) rerunRebuilt(ctx context.Context, sessionID string, o owned, firstSeq int64, prompt, account string, forked runner.Turn,
	sy *syncer, runErr error) (runner.Result, error) {
	a.lg.Warn("native fork did not run; rebuilding", zap.String("session", sessionID), zap.String("agent", o.Agent),
		zap.String("fork_path", forkRebuild), zap.Error(runErr))
	return a.rerun(ctx, sessionID, o, firstSeq, prompt, account, forked, sy)
}
