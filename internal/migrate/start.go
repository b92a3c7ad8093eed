package migrate

import (
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	"google.golang.org/protobuf/types/known/timestamppb"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
)

// StartRequest selects sessions and a destination.
type StartRequest struct {
	To, Label    string // node name or label; label restricts to nodes carrying it
	SessionIDs   []string
	FromNode     string // every session this node owns (drain)
	All          bool
	Wait         time.Duration
	MaxParallel  int
	RequestID    string
	RequestBy    string // the principal that sent RequestID ("role:name"): ids are scoped to it
	SkipWorkTree bool
	CleanSource  bool // stash each source checkout clean once its session moved
}

func (mg *Manager) validate(r *StartRequest) error {
	picks := 0
	if len(r.SessionIDs) > 0 {
		picks++
	}
	if r.FromNode != "" {
		picks++
	}
	if r.All {
		picks++
	}
	switch {
	case picks != 1:
		return errs.Invalid("name the sessions to move: session ids, --from NODE or --all (exactly one)")
	case r.To == "" && r.Label == "" && r.FromNode == "":
		return errs.Invalid("name the destination: --to NODE|LABEL or --label NAME")
	case r.To != "" && !ids.ValidName(r.To):
		return errs.Invalid("destination %q is not a valid node name or label", r.To)
	case r.Label != "" && !ids.ValidName(r.Label):
		return errs.Invalid("label %q is malformed", r.Label)
	case r.FromNode != "" && !ids.ValidName(r.FromNode):
		return errs.Invalid("node %q is malformed", r.FromNode)
	case r.Wait < 0 || r.Wait > mg.cfg.MaxWait:
		return errs.Invalid("--wait must be between 0 and %s", mg.cfg.MaxWait)
	case r.MaxParallel < 0 || r.MaxParallel > mg.cfg.MaxParallel:
		return errs.Invalid("--max-parallel must be between 1 and %d", mg.cfg.MaxParallel)
	case r.RequestID != "" && !ids.ValidClientID(r.RequestID):
		return errs.Invalid("request_id %q is malformed", r.RequestID)
	case len(r.SessionIDs) > 10000:
		return errs.Invalid("at most 10000 sessions per migration")
	}
	for _, id := range r.SessionIDs {
		if !ids.ValidSessionID(id) {
			return errs.Invalid("session id %q is malformed", id)
		}
	}
	return nil
}

// Start validates the request, resolves the destination and the sessions,
// records the migration and starts moving. A session already fenced by
// another migration makes the request ABORTED when it was named; --all and
// --from skip it.
func (mg *Manager) Start(ctx context.Context, r StartRequest) (*castv1.Migration, error) {
	if err := mg.validate(&r); err != nil {
		return nil, err
	}
	if r.RequestID != "" {
		if rec, ok, err := mg.st.MigrationForRequest(ctx, fence.RequestKey(r.RequestBy, r.RequestID)); err != nil || ok {
			if ok {
				if err := sameRequest(r, rec.M); err != nil {
					return nil, err
				}
				return rec.M, nil
			}
			return nil, err
		}
	}
	if r.Wait == 0 {
		r.Wait = mg.cfg.DefaultWait
	}
	if r.MaxParallel == 0 {
		r.MaxParallel = mg.cfg.DefaultMaxParallel
	}
	target, err := mg.resolveTarget(ctx, r.To, r.Label, r.FromNode)
	if err != nil {
		return nil, err
	}
	sessions, err := mg.selectSessions(ctx, r, target)
	if err != nil {
		return nil, err
	}
	m := &castv1.Migration{
		Id: "m" + strings.ToLower(ids.NewClientID()), Target: firstNonEmpty(r.To, r.Label), TargetNode: target,
		State: castv1.MigrationState_MIGRATION_STATE_RUNNING, Sessions: sessions, Wait: dur(r.Wait),
		MaxParallel: int32(r.MaxParallel), RequestId: r.RequestID, SkipWorktree: r.SkipWorkTree, CleanSource: r.CleanSource,
		FromNode: r.FromNode, All: r.All,
	}
	// Claimed before it exists, so no other replica adopts it between its
	// creation and its launch here.
	l := mg.claimNew(ctx, m.Id)
	rec, existed, err := mg.st.CreateMigration(ctx, m, fence.RequestKey(r.RequestBy, r.RequestID))
	if err != nil || rec.M.Id != m.Id {
		if l != 0 {
			mg.release(m.Id, l)
		}
	}
	if err != nil {
		return nil, err
	}
	if existed {
		if err := sameRequest(r, rec.M); err != nil {
			return nil, err
		}
	}
	if !existed {
		for _, ms := range rec.M.Sessions {
			if ms.State == castv1.MigrationState_MIGRATION_STATE_HANDED_OFF {
				mg.m.Sessions.WithLabelValues(StateName(ms.State)).Inc()
			}
		}
		mg.lg.Info("migration started", zap.String("migration", rec.M.Id), zap.String("to", target), zap.Int("sessions", len(sessions)))
	}
	if !Terminal(rec.M.State) {
		mg.launch(rec.M.Id, true)
	}
	return rec.M, nil
}

// resolveTarget picks the destination: a connected node named to, else a
// connected node labelled to (and label), the one owning fewest sessions;
// never the node being drained. With neither to nor label (a drain), any
// other connected node.
func (mg *Manager) resolveTarget(ctx context.Context, to, label, from string) (string, error) {
	nodes, err := mg.st.ListNodes(ctx)
	if err != nil {
		return "", err
	}
	var cands []*castv1.Node
	for _, n := range nodes {
		switch {
		case !n.Connected || n.Name == from:
		case to != "" && n.Name == to && (label == "" || slices.Contains(n.Labels, label)):
			return n.Name, nil
		case (to == "" || slices.Contains(n.Labels, to)) && (label == "" || slices.Contains(n.Labels, label)):
			cands = append(cands, n)
		}
	}
	if len(cands) == 0 {
		want := firstNonEmpty(to, label)
		if want == "" {
			return "", errs.New(errs.KindFailedPrecondition, errs.ReasonNoNode, "no other node is connected to move the sessions of %s to", from)
		}
		return "", errs.New(errs.KindFailedPrecondition, errs.ReasonNoNode,
			"no connected node is named or labelled %q; `cast nodes` lists nodes and their labels", want).With("target", want)
	}
	load := map[string]int{}
	for _, n := range cands {
		owned, err := mg.st.SessionsOwnedBy(ctx, n.Name)
		if err != nil {
			return "", err
		}
		load[n.Name] = len(owned)
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if load[cands[i].Name] != load[cands[j].Name] {
			return load[cands[i].Name] < load[cands[j].Name]
		}
		return cands[i].Name < cands[j].Name
	})
	return cands[0].Name, nil
}

// selectSessions lists what moves, each with its owner and token now.
func (mg *Manager) selectSessions(ctx context.Context, r StartRequest, target string) ([]*castv1.MigrationSession, error) {
	var list []*castv1.Session
	named := len(r.SessionIDs) > 0
	switch {
	case named:
		for _, id := range dedupe(r.SessionIDs) {
			sess, err := mg.st.GetSession(ctx, id)
			if err != nil {
				return nil, err
			}
			list = append(list, sess)
		}
	case r.FromNode != "":
		owned, err := mg.st.SessionsOwnedBy(ctx, r.FromNode)
		if err != nil {
			return nil, err
		}
		for _, o := range owned {
			list = append(list, o.Session)
		}
	default:
		err := fence.EachSession(ctx, mg.st, 500, true, func(sess *castv1.Session) error {
			list = append(list, sess)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	var out []*castv1.MigrationSession
	for _, sess := range list {
		if ok, err := mg.movable(ctx, sess, target, named); err != nil || !ok {
			if err != nil {
				return nil, err
			}
			continue
		}
		if ms, err := mg.diverted(ctx, sess, target); err != nil || ms != nil {
			if err != nil {
				return nil, err
			}
			out = append(out, ms)
			continue
		}
		_, tok, err := mg.st.Owner(ctx, sess.Id)
		if err != nil {
			return nil, err
		}
		out = append(out, &castv1.MigrationSession{
			SessionId: sess.Id, SourceNode: sess.Node, SourceToken: tok, SourceCwd: sess.Cwd,
			State: castv1.MigrationState_MIGRATION_STATE_PENDING,
		})
	}
	if len(out) == 0 {
		return nil, errs.New(errs.KindFailedPrecondition, errs.ReasonNothingToMove,
			"nothing to move: no selected session lives outside %s", target)
	}
	return out, nil
}

// diverted is the already finished entry of a session with history whose
// destination's agent failed its canary: a handoff started a new session
// there instead. nil when the session moves.
func (mg *Manager) diverted(ctx context.Context, sess *castv1.Session, target string) (*castv1.MigrationSession, error) {
	if mg.divert == nil || sess.LastSeq == 0 {
		return nil, nil
	}
	to, why, err := mg.divert.Divert(ctx, sess, target)
	if err != nil || to == "" {
		return nil, err
	}
	return &castv1.MigrationSession{SessionId: sess.Id, SourceNode: sess.Node, SourceCwd: sess.Cwd,
		State: castv1.MigrationState_MIGRATION_STATE_HANDED_OFF, Reason: why, HandedOffTo: to, UpdateTime: timestamppb.Now()}, nil
}

// movable refuses (named) or skips (--all, --from) a session that is on the
// target already or fenced by another migration.
func (mg *Manager) movable(_ context.Context, sess *castv1.Session, target string, named bool) (bool, error) {
	switch {
	case sess.Node == target && named:
		return false, errs.New(errs.KindFailedPrecondition, errs.ReasonOnTarget,
			"session %s already runs on %s", sess.Id, target).With("session", sess.Id)
	case sess.Node == target:
		return false, nil
	case sess.FencedBy != "" && named:
		return false, errs.New(errs.KindFailedPrecondition, errs.ReasonSessionFenced,
			"session %s is already being moved by migration %s; `cast migrate status %s` shows it",
			sess.Id, sess.FencedBy, sess.FencedBy).With("migration", sess.FencedBy)
	case sess.FencedBy != "":
		return false, nil
	}
	return true, nil
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// sameRequest refuses a request id reused for another migration: the
// retry's answer would be the first one's, so a start naming other
// sessions or another destination would report them moving while nothing
// moves them. Only what the record keeps is compared: how the sessions
// were chosen (named, --from NODE or --all) and, when named, which; --all
// and --from select anew each time, so their sessions are not.
func sameRequest(r StartRequest, m *castv1.Migration) error {
	same := r.FromNode == m.FromNode && r.All == m.All &&
		firstNonEmpty(r.To, r.Label) == m.Target && r.SkipWorkTree == m.SkipWorktree && r.CleanSource == m.CleanSource &&
		(r.Wait == 0 || r.Wait == m.Wait.AsDuration()) && (r.MaxParallel == 0 || int32(r.MaxParallel) == m.MaxParallel)
	if same && len(r.SessionIDs) > 0 {
		had := make([]string, 0, len(m.Sessions))
		for _, ms := range m.Sessions {
			had = append(had, ms.SessionId)
		}
		named := slices.Clone(r.SessionIDs)
		slices.Sort(had)
		slices.Sort(named)
		same = slices.Equal(had, slices.Compact(named))
	}
	if same {
		return nil
	}
	return errs.New(errs.KindAlreadyExists, errs.ReasonClientIDReused,
		"request_id %s already started migration %s, of other sessions or with other options; give this migration a new request_id", r.RequestID, m.Id).
		With("migration", m.Id)
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
