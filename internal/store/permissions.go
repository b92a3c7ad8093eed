package store

import (
	"context"
	"encoding/json"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/validate"
)

// Permission is a tool run waiting on a person, at perms/{s}/{request id}.
// It lives in the store, not in a node's memory, so a session stopped at a
// prompt can be answered from any replica (and, later, move machines and
// be asked again there).
type Permission struct {
	RequestID string    `json:"request_id"`
	Tool      string    `json:"tool"`
	Input     string    `json:"input"`
	Asked     time.Time `json:"asked"`
	Answered  bool      `json:"answered"`
	Allow     bool      `json:"allow"`
	Message   string    `json:"message,omitempty"`
}

func (s *Store) permKey(sessionID, rid string) string { return s.key("perms", sessionID, rid) }

// AskPermission records a pending request (idempotent on its id) and marks
// the session WAITING_PERMISSION; it returns the session as the wait left
// it, or nil when the request was asked before and answered since (nothing
// waits: the session is as the answer put it).
func (s *Store) AskPermission(ctx context.Context, sessionID string, p Permission) (*castv1.Session, error) {
	if _, _, err := s.Owner(ctx, sessionID); err != nil {
		return nil, err
	}
	p.Asked = time.Now().UTC()
	b, _ := json.Marshal(p)
	key := s.permKey(sessionID, p.RequestID)
	tx, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(b))).Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return nil, err
	}
	if !tx.Succeeded {
		// Asked again with its id: a request answered meanwhile leaves the
		// session as its answer put it (no prompt is left to show).
		var was Permission
		if kvs := tx.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 && json.Unmarshal(kvs[0].Value, &was) == nil {
			if was.Tool != p.Tool || was.Input != p.Input {
				// Another tool run under a known id would get that run's answer.
				return nil, errs.New(errs.KindAlreadyExists, errs.ReasonClientIDReused,
					"permission request %s was asked for another tool run; give each request its own id", p.RequestID)
			}
			if was.Answered {
				return nil, nil
			}
		}
	}
	return s.UpdateSession(ctx, sessionID, func(sess *castv1.Session) error {
		sess.State, sess.StateReason = castv1.SessionState_SESSION_STATE_WAITING_PERMISSION, "permission for "+p.Tool+" "+validate.Clip(p.Input, 200) // cut between characters: the record must encode
		return nil
	})
}

// AnswerPermission answers rid, or the oldest pending request when rid is
// empty, and puts the session back to RUNNING.
func (s *Store) AnswerPermission(ctx context.Context, sessionID, rid string, allow bool, msg string) (Permission, error) {
	resp, err := s.cli.Get(ctx, s.key("perms", sessionID)+"/", clientv3.WithPrefix())
	if err != nil {
		return Permission{}, err
	}
	var pick *Permission
	var modRev int64
	for _, kv := range resp.Kvs {
		var p Permission
		if json.Unmarshal(kv.Value, &p) != nil || p.Answered {
			continue
		}
		if (rid == "" && (pick == nil || p.Asked.Before(pick.Asked))) || p.RequestID == rid {
			pp := p
			pick, modRev = &pp, kv.ModRevision
		}
	}
	if pick == nil {
		return Permission{}, errs.New(errs.KindFailedPrecondition, errs.ReasonNoPermissionAsked, "session %s has no pending permission request; `cast ls` shows what it is doing", sessionID)
	}
	pick.Answered, pick.Allow, pick.Message = true, allow, msg
	b, _ := json.Marshal(pick)
	tx, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(s.permKey(sessionID, pick.RequestID)), "=", modRev)).
		Then(clientv3.OpPut(s.permKey(sessionID, pick.RequestID), string(b))).Commit()
	if err != nil {
		return Permission{}, err
	}
	if !tx.Succeeded {
		return Permission{}, errs.New(errs.KindAborted, errs.ReasonConflict, "the request was answered meanwhile")
	}
	_, err = s.UpdateSession(ctx, sessionID, func(sess *castv1.Session) error {
		if sess.State == castv1.SessionState_SESSION_STATE_WAITING_PERMISSION {
			sess.State, sess.StateReason = castv1.SessionState_SESSION_STATE_RUNNING, ""
		}
		return nil
	})
	return *pick, err
}
