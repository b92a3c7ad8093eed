package controlplane

import (
	"context"
	"slices"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/custody"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/validate"
)

// maxLabelChanges bounds one LabelNode call.
const maxLabelChanges = 64

// LabelNode sets and removes a node's admin labels. A node whose custody
// mark goes gives up the logins it holds at once.
func (h *nodeService) LabelNode(ctx context.Context, req *castv1.LabelNodeRequest) (*castv1.LabelNodeResponse, error) {
	if err := validLabels(req); err != nil {
		return nil, err
	}
	labels, err := h.s.store.LabelNode(ctx, req.Name, req.Set, req.Remove)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	if h.s.vault != nil && !custody.Marked(labels) {
		if err := h.s.vault.Resign(ctx, req.Name); err != nil {
			return nil, toStatus(h.s.lg, err)
		}
	}
	who := "admin"
	if p, ok := authz.FromContext(ctx); ok {
		who = p.String()
	}
	h.s.lg.Info("node labels changed", zap.String("node", req.Name), zap.String("by", who),
		zap.Any("set", req.Set), zap.Strings("removed", req.Remove), zap.Bool("custodian", custody.Marked(labels)))
	return &castv1.LabelNodeResponse{Labels: labels}, nil
}

func validLabels(req *castv1.LabelNodeRequest) error {
	checks := []error{validate.Need(validate.Name, "name", req.Name)}
	if n := len(req.Set) + len(req.Remove); n == 0 || n > maxLabelChanges {
		return invalid("give 1 to %d labels to set (KEY=VALUE) or remove (KEY-), not %d", maxLabelChanges, n)
	}
	for k, v := range req.Set {
		checks = append(checks, validate.Need(validate.LabelKey, "set", k), validate.Check(validate.Name, "set["+k+"]", v))
		if slices.Contains(req.Remove, k) {
			return invalid("label %s is both set and removed; give one", k)
		}
	}
	for _, k := range req.Remove {
		checks = append(checks, validate.Need(validate.LabelKey, "remove", k))
	}
	return refuse(checks...)
}
