package controlplane

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/custody"
	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/validate"
)

// newVault builds token custody's record when --token-custody is on and a
// secrets key exists (nil otherwise: without a key fleet accounts are
// refused anyway).
func (s *Server) newVault() error {
	if !s.cfg.TokenCustody {
		return nil
	}
	box, err := s.openBox()
	if err != nil {
		return err
	}
	if box == nil {
		s.lg.Info("token custody is off: no secrets key (--secrets-key-file), so no fleet accounts either")
		return nil
	}
	s.vault = s.store.Vault(box, agents.CredentialFor)
	s.vault.OnHeld = func(h store.CustodyHolding) {
		s.lg.Info("custody held", zap.String("node", h.Node), zap.String("agent", h.Agent),
			zap.String("account", h.Account), zap.Time("since", h.Since))
	}
	return nil
}

// auditCustody logs each custody that ends (lease lapsed, mark removed,
// account removed) with its holder and span, beside the "custody held"
// line of its start: the audit log says which node held which login when.
// Every replica watching logs it.
func (s *Server) auditCustody(ctx context.Context) {
	if s.vault == nil {
		return
	}
	s.store.FollowCustodyDeletes(ctx, func(key string, prev []byte) {
		if h, ok := s.vault.Released(key, prev, time.Now()); ok {
			s.lg.Info("custody ended", zap.String("node", h.Node), zap.String("agent", h.Agent),
				zap.String("account", h.Account), zap.Time("since", h.Since), zap.Time("until", h.Until))
		}
	})
}

// needMark refuses custody to a node an admin has not marked for it
// (custody.MarkLabel).
func (s *Server) needMark(ctx context.Context, node string) error {
	labels, err := s.store.NodeLabels(ctx, node)
	if err != nil {
		return err
	}
	if !custody.Marked(labels) {
		return custody.NotMarked(node)
	}
	return nil
}

// custodyCopy is what FetchCredential hands a node for agent's account,
// whose stored file is cred: a login custody holds goes out as custody's
// newest access token without its refresh token, as op ACCESS gives it,
// since only the custodian may hold the refresh token (a node that copies,
// as one with --token-custody=false does, would refresh with it on its
// own); anything else as it is.
func (s *Server) custodyCopy(ctx context.Context, agent, account string, cred []byte) ([]byte, error) {
	if s.vault == nil {
		return cred, nil
	}
	acc, _, err := s.vault.AccessOnly(ctx, agent, account)
	switch {
	case errs.HasReason(err, custody.ReasonNotInCustody):
		return cred, nil
	case err != nil:
		return nil, err
	}
	return acc, nil
}

// Custody is token custody's node side (docs/token-custody.md). The
// access token goes to any connected node for the agent's active account;
// the refresh token only to that account's custodian.
func (h *nodeService) Custody(ctx context.Context, req *castv1.CustodyRequest) (*castv1.CustodyResponse, error) {
	if err := refuse(validate.Need(validate.Name, "node", req.Node), validAccount(req.Agent, req.Account)); err != nil {
		return nil, err
	}
	resp, err := h.custody(ctx, req)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	h.s.lg.Debug("custody step", zap.String("node", req.Node), zap.String("agent", req.Agent),
		zap.String("account", req.Account), zap.Stringer("op", req.Op))
	return resp, nil
}

func (h *nodeService) custody(ctx context.Context, req *castv1.CustodyRequest) (*castv1.CustodyResponse, error) {
	v := h.s.vault
	if v == nil {
		return nil, errs.New(errs.KindFailedPrecondition, custody.ReasonOff, "token custody is off on this control plane (--token-custody)")
	}
	lease, err := h.s.store.NodeLease(ctx, req.Node)
	if err != nil {
		return nil, errs.New(errs.KindUnavailable, errs.ReasonUnavailable, "read node lease: %v", err)
	}
	if lease == 0 {
		return nil, errs.New(errs.KindFailedPrecondition, errs.ReasonNodeNotConn, "node %q is not connected; custody serves connected nodes only", req.Node).With("node", req.Node)
	}
	switch req.Op {
	case castv1.CustodyOp_CUSTODY_OP_ACCESS:
		if err := h.needActive(ctx, req.Agent, req.Account); err != nil {
			return nil, err
		}
		cred, _, err := v.AccessOnly(ctx, req.Agent, req.Account)
		return &castv1.CustodyResponse{Credential: cred}, err
	case castv1.CustodyOp_CUSTODY_OP_ELECT:
		if err := h.needActive(ctx, req.Agent, req.Account); err != nil {
			return nil, err
		}
		if err := h.s.needMark(ctx, req.Node); err != nil {
			return nil, err
		}
		who, err := v.Elect(ctx, req.Agent, req.Account, req.Node, lease)
		return &castv1.CustodyResponse{Custodian: who}, err
	case castv1.CustodyOp_CUSTODY_OP_PUT:
		if err := h.mayPut(ctx, req); err != nil {
			return nil, err
		}
		_, err := v.Put(ctx, req.Agent, req.Account, req.Credential, req.Node)
		return &castv1.CustodyResponse{}, err
	case castv1.CustodyOp_CUSTODY_OP_END_REFRESH:
		return &castv1.CustodyResponse{}, v.EndRefresh(ctx, req.Agent, req.Account, req.Node)
	}
	// The whole credential (GET) and a refresh only on a marked node,
	// even one elected before its mark was taken away.
	if err := h.s.needMark(ctx, req.Node); err != nil {
		return nil, err
	}
	who, err := v.Custodian(ctx, req.Agent, req.Account)
	if err != nil {
		return nil, err
	}
	if who != req.Node {
		return nil, errs.New(errs.KindPermissionDenied, custody.ReasonNotCustodian, "node %q is not the custodian of %s account %q", req.Node, req.Agent, req.Account)
	}
	switch req.Op {
	case castv1.CustodyOp_CUSTODY_OP_GET:
		cred, _, err := v.Get(ctx, req.Agent, req.Account)
		return &castv1.CustodyResponse{Credential: cred}, err
	case castv1.CustodyOp_CUSTODY_OP_BEGIN_REFRESH:
		return &castv1.CustodyResponse{}, v.BeginRefresh(ctx, req.Agent, req.Account, req.Node, issueTime(req))
	}
	return nil, errs.Invalid("custody op %v is not one of ACCESS, ELECT, GET, PUT, BEGIN_REFRESH, END_REFRESH", req.Op)
}

// needActive refuses an account that is not the agent's active one.
func (h *nodeService) needActive(ctx context.Context, agent, account string) error {
	accs, err := h.s.fleet.List(ctx, agent)
	if err != nil {
		return err
	}
	for _, a := range accs {
		if a.Name == account && a.Active {
			return nil
		}
	}
	return errs.New(errs.KindFailedPrecondition, errs.ReasonAccountNotActive, "%s account %q is not the active one; custody serves the active account", agent, account)
}

// mayPut lets a node store a credential for an account it is custodian
// of, whose refresh it began (a restarted custodian reporting what it
// left), or that is active (a CLI that refreshed on its own); no other.
// A login custody does not hold is refused as NOT_IN_CUSTODY, not as
// inactive: a removed account is never active, and a restarted custodian
// deletes its copy of the removed login only on NOT_IN_CUSTODY
// (custody.Node.Reconcile).
func (h *nodeService) mayPut(ctx context.Context, req *castv1.CustodyRequest) error {
	who, err := h.s.vault.Custodian(ctx, req.Agent, req.Account)
	if err != nil || who == req.Node {
		return err
	}
	in, err := h.s.vault.Intent(ctx, req.Agent, req.Account)
	if err != nil || (in != nil && in.Node == req.Node) {
		return err
	}
	err = h.needActive(ctx, req.Agent, req.Account)
	if err == nil {
		return nil
	}
	if _, _, gerr := h.s.vault.Get(ctx, req.Agent, req.Account); errs.HasReason(gerr, custody.ReasonNotInCustody) {
		return gerr
	}
	return err
}

// issueTime is a refresh's credential's issue time: issue_time, or the
// deprecated issued an older node sends.
func issueTime(req *castv1.CustodyRequest) time.Time {
	if req.GetIssueTime() != nil {
		return req.GetIssueTime().AsTime()
	}
	return req.GetIssued().AsTime()
}
