package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"io"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/migrate"
	"github.com/cast-dev/cast/internal/validate"
)

// Work tree relay for migrations: the source node uploads a bundle, the
// destination downloads it; both are checked against the migration record
// (only its source may upload, only its target may download).

// DefaultMaxWorkTreeBytes bounds one relayed work tree (etcd holds it
// while the session moves).
const DefaultMaxWorkTreeBytes = 64 << 20

// checkMigrationParty returns nil when node is the source (source=true) or
// the target of the session's migration.
func (h *nodeService) checkMigrationParty(ctx context.Context, migID, sessionID, node string, source bool) error {
	if err := refuse(
		validate.Need(validate.ClientID, "migration_id", migID),
		validate.Need(validate.SessionID, "session_id", sessionID),
		validate.Need(validate.Name, "node", node),
	); err != nil {
		return err
	}
	rec, err := h.s.store.GetMigration(ctx, migID)
	if err != nil {
		return toStatus(h.s.lg, err)
	}
	for _, ms := range rec.M.Sessions {
		if ms.SessionId != sessionID {
			continue
		}
		if (source && ms.SourceNode == node) || (!source && rec.M.TargetNode == node) {
			// Once the move ended (a cancel, a failure, the commit), what
			// it kept was deleted: a late export's upload would stay in
			// etcd for good, and nothing may read it any more.
			if migrate.Terminal(ms.State) {
				return toStatus(h.s.lg, errs.New(errs.KindFailedPrecondition, errs.ReasonMigrationDone,
					"migration %s already ended for session %s (%s)", migID, sessionID, migrate.StateName(ms.State)).With("migration", migID))
			}
			return nil
		}
		return toStatus(h.s.lg, errs.New(errs.KindFailedPrecondition, errs.ReasonNotOwner,
			"node %q is not the %s of migration %s", node, map[bool]string{true: "source", false: "destination"}[source], migID))
	}
	return toStatus(h.s.lg, errs.NotFound("session %s is not part of migration %s", sessionID, migID))
}

func (h *nodeService) UploadWorkTree(stream castv1.NodeService_UploadWorkTreeServer) error {
	ctx := stream.Context()
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	migID, sid := first.MigrationId, first.SessionId
	if err := h.checkMigrationParty(ctx, migID, sid, first.Node, true); err != nil {
		return err
	}
	// An upload that finished wrote its manifest last: the export is done,
	// and the destination may be reading it. The migration resends an
	// unanswered export, and a resend that reaches the source after the
	// first export finished uploads again: that copy is not taken (it
	// would delete the tree under the download and roll the move back).
	if _, done, err := h.s.store.WorkTreeRecord(ctx, migID, sid, fence.WorkTreeManifest); err != nil {
		return toStatus(h.s.lg, err)
	} else if done {
		h.s.lg.Info("work tree upload again for a finished export ignored", zap.String("migration", migID), zap.String("session", sid))
		return stream.SendAndClose(&castv1.UploadWorkTreeResponse{})
	}
	if err := h.s.store.DeleteWorkTree(ctx, migID, sid); err != nil { // a retried upload starts clean
		return toStatus(h.s.lg, err)
	}
	var size int64
	for i, f := 0, first; ; i++ {
		if len(f.Chunk) > 0 {
			size += int64(len(f.Chunk))
			if size > h.s.cfg.MaxWorkTreeBytes {
				_ = h.s.store.DeleteWorkTree(ctx, migID, sid)
				return toStatus(h.s.lg, errs.New(errs.KindResourceExhausted, errs.ReasonWorkTree,
					"the work tree bundle is over %d MiB; commit or remove large files, or move with --skip-worktree", h.s.cfg.MaxWorkTreeBytes>>20))
			}
			if err := h.s.store.PutWorkTreeChunk(ctx, migID, sid, i, f.Chunk); err != nil {
				return toStatus(h.s.lg, err)
			}
		}
		if f.ManifestJson != "" {
			if !json.Valid([]byte(f.ManifestJson)) {
				return invalid("manifest_json is not JSON")
			}
			if err := h.s.store.PutWorkTreeRecord(ctx, migID, sid, fence.WorkTreeManifest, f.ManifestJson); err != nil {
				return toStatus(h.s.lg, err)
			}
			// The move may have ended while this upload ran: its rollback or
			// commit deleted the work tree before these writes. Looked at
			// after them, so either this check or that delete clears them.
			if err := h.checkMigrationParty(ctx, migID, sid, first.Node, true); err != nil {
				_ = h.s.store.DeleteWorkTree(ctx, migID, sid)
				return err
			}
			return stream.SendAndClose(&castv1.UploadWorkTreeResponse{Size: size})
		}
		if f, err = stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return invalid("the upload ended without a manifest")
			}
			return err
		}
	}
}

func (h *nodeService) DownloadWorkTree(req *castv1.DownloadWorkTreeRequest, stream castv1.NodeService_DownloadWorkTreeServer) error {
	ctx := stream.Context()
	if err := h.checkMigrationParty(ctx, req.MigrationId, req.SessionId, req.Node, false); err != nil {
		return err
	}
	manifest, ok, err := h.s.store.WorkTreeRecord(ctx, req.MigrationId, req.SessionId, fence.WorkTreeManifest)
	if err != nil {
		return toStatus(h.s.lg, err)
	}
	if !ok {
		return toStatus(h.s.lg, errs.New(errs.KindFailedPrecondition, errs.ReasonWorkTreeNotUploaded, "the work tree was not uploaded (yet)"))
	}
	first := true
	err = h.s.store.ReadWorkTree(ctx, req.MigrationId, req.SessionId, func(chunk []byte) error {
		resp := &castv1.DownloadWorkTreeResponse{Chunk: chunk}
		if first {
			resp.ManifestJson, first = manifest, false
		}
		return stream.Send(resp)
	})
	if err != nil {
		return toStatus(h.s.lg, err)
	}
	if first { // an empty bundle still carries its manifest
		return stream.Send(&castv1.DownloadWorkTreeResponse{ManifestJson: manifest})
	}
	return nil
}

func (h *nodeService) ReportWorkTree(ctx context.Context, req *castv1.ReportWorkTreeRequest) (*castv1.ReportWorkTreeResponse, error) {
	if err := refuse(
		validate.Check(validate.Reason, "error", req.Error),
		validate.Check(validate.Cwd, "cwd", req.Cwd),
	); err != nil {
		return nil, err
	}
	switch req.Phase {
	case "export":
		if err := h.checkMigrationParty(ctx, req.MigrationId, req.SessionId, req.Node, true); err != nil {
			return nil, err
		}
		if req.Error == "" {
			return nil, invalid("an export report carries an error; success is the upload itself")
		}
		if err := h.s.store.PutWorkTreeRecord(ctx, req.MigrationId, req.SessionId, fence.WorkTreeExportError, req.Error); err != nil {
			return nil, toStatus(h.s.lg, err)
		}
	case "import":
		if err := h.checkMigrationParty(ctx, req.MigrationId, req.SessionId, req.Node, false); err != nil {
			return nil, err
		}
		val, _ := json.Marshal(map[string]string{"error": req.Error, "cwd": req.Cwd})
		if err := h.s.store.PutWorkTreeRecord(ctx, req.MigrationId, req.SessionId, fence.WorkTreeImport, string(val)); err != nil {
			return nil, toStatus(h.s.lg, err)
		}
	default:
		return nil, invalid("phase must be export or import, not %s", validate.Show(req.Phase))
	}
	return &castv1.ReportWorkTreeResponse{}, nil
}
