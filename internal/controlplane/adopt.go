package controlplane

import (
	"context"

	"github.com/cast-dev/cast/internal/adoption"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/validate"
)

// AdoptSession keeps a batch of a native session a node found
// (internal/adoption does the work).
func (h *nodeService) AdoptSession(ctx context.Context, req *castv1.AdoptSessionRequest) (*castv1.AdoptSessionResponse, error) {
	if err := refuse(
		validate.Need(validate.Name, "node", req.Node),
		validate.Check(validate.Title, "title", req.Title),
		validate.Check(validate.Cwd, "cwd", req.Cwd),
		validate.Range("history_messages", req.HistoryMessages, 0, maxHistoryMessages),
	); err != nil {
		return nil, err
	}
	if err := refuse(validate.Check(validate.Ident, "parent_call_id", req.ParentCallId)); err != nil {
		return nil, err
	}
	for _, id := range []string{req.SessionId, req.ParentSessionId} {
		if id == "" {
			continue
		}
		if err := validSessionID(id); err != nil {
			return nil, err
		}
	}
	if err := validMessages(req.Messages, maxAppendBatch, true); err != nil {
		return nil, err
	}
	id, out, err := adoption.Keep(ctx, h.s.store, adoption.Request{
		Node: req.Node, Principal: caller(ctx), Origin: req.Origin, SessionID: req.SessionId,
		Cwd: req.Cwd, Title: req.Title, History: req.HistoryMessages, Messages: req.Messages,
		ParentNativeID: req.ParentNativeId, ParentSessionID: req.ParentSessionId,
		ParentCallID: req.ParentCallId,
	})
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	return &castv1.AdoptSessionResponse{SessionId: id, Messages: out}, nil
}
