package moves

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/turnstate"
	"github.com/cast-dev/cast/internal/validate"
)

// NotifyParent tells a worker's parent session that the worker finished a
// turn (or was interrupted), is blocked (failed) or waits on a permission, as a user message, so
// the parent's agent is woken with it. The message's client id is derived
// from the worker's state and progress, so a repeated report stores it once.
// A permission request tells it through NotifyParentOfPermission.
func NotifyParent(ctx context.Context, st Store, worker *castv1.Session) error {
	return notifyParent(ctx, st, worker, fmt.Sprintf("worker.%s.%d.%d", worker.Id, worker.State, worker.LastSeq))
}

// NotifyParentOfPermission tells a worker's parent that the worker waits
// on its permission request requestID (worker as that request's wait left
// it). The notice is keyed by the request, not by the worker's state and
// seq: a turn that asks twice with no message stored between has two waits
// the parent must hear of, and a request asked again (`cast mcp` asks again
// with its id when one call's wait runs out), a message stored meanwhile
// or not, is the same wait, heard of once.
func NotifyParentOfPermission(ctx context.Context, st Store, worker *castv1.Session, requestID string) error {
	if worker.State != castv1.SessionState_SESSION_STATE_WAITING_PERMISSION {
		return nil
	}
	// Hashed: a request id takes up the whole of a client id's length.
	sum := sha256.Sum256([]byte(requestID))
	return notifyParent(ctx, st, worker, fmt.Sprintf("worker.%s.permission.%s", worker.Id, hex.EncodeToString(sum[:12])))
}

// notifyParent is NotifyParent storing the notice under client id key.
func notifyParent(ctx context.Context, st Store, worker *castv1.Session, key string) error {
	if !worker.Subagent || worker.ParentId == "" {
		return nil
	}
	if worker.Archived {
		// Removed (`cast rm`): nothing runs in it and nothing reaches it,
		// so a notice would wake the parent's agent for a worker it can
		// no longer use (a start refused as SESSION_ARCHIVED ends failed).
		return nil
	}
	if worker.LastTurnAbandoned {
		return nil // stopped by a move: its prompt runs again, and the parent hears how that turn ends
	}
	var what string
	switch worker.State {
	case castv1.SessionState_SESSION_STATE_IDLE:
		if more, err := runsAgain(ctx, st, worker); err != nil || more {
			return err // the parent hears how the worker's next turn ends
		}
		what = "finished"
		if worker.LastTurnInterrupted {
			what = "was interrupted (its turn stopped before it finished)"
		}
	case castv1.SessionState_SESSION_STATE_FAILED:
		what = "is blocked: " + worker.StateReason
	case castv1.SessionState_SESSION_STATE_WAITING_PERMISSION:
		what = "waits on a permission: " + worker.StateReason
	default:
		return nil
	}
	text := fmt.Sprintf("[cast] Worker %s (%s) %s.", worker.Id, agents.DisplayName(worker.Agent), what)
	if last := lastAnswer(ctx, st, worker); last != "" {
		text += "\n\nIts last answer:\n" + last
	}
	text += fmt.Sprintf("\n\nRead the whole thread with `cast read %s`; reply to it with `cast send -s %s ...`.", worker.Id, worker.Id)
	m := &castv1.Message{ClientId: key, Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: text}
	// One notice per key: if its text changed since (a new state reason,
	// a newer last answer), the one already stored stands. An archived
	// parent is told nothing: the message would wake its agent.
	_, err := st.Append(ctx, worker.ParentId, []*castv1.Message{m}, fence.Guard{Open: true})
	if err != nil && !errs.HasReason(err, errs.ReasonClientIDReused) && !errs.HasReason(err, errs.ReasonSessionArchived) {
		return err
	}
	return nil
}

// errQueued stops runsAgain's read at the first queued message.
var errQueued = errors.New("a user message waits for the next turn")

// runsAgain says whether an idle worker has a user message its turns have
// not taken yet (sent while its last turn ran): its node runs another turn
// at once, so the worker has not finished what it was given. A worker no
// turn has delivered to yet (adopted history) has nothing queued to tell.
func runsAgain(ctx context.Context, st Store, w *castv1.Session) (bool, error) {
	if w.DeliveredSeq < 1 || w.DeliveredSeq >= w.LastSeq {
		return false, nil
	}
	err := eachMessage(ctx, st, w.Id, w.DeliveredSeq+1, w.LastSeq, func(m *castv1.Message) error {
		if m.Kind == castv1.MessageKind_MESSAGE_KIND_USER {
			return errQueued
		}
		return nil
	})
	if errors.Is(err, errQueued) {
		return true, nil
	}
	return false, err
}

// lastAnswerWindow is how many of a worker's newest messages lastAnswer
// looks through for its answer.
const lastAnswerWindow = 50

// lastAnswer is the worker's newest assistant text, clipped. It reads the
// whole window, page by page: a page is bounded in bytes, so a tail of
// large tool outputs spans several and the newest answer is on the last.
func lastAnswer(ctx context.Context, st Store, s *castv1.Session) string {
	last := ""
	err := eachMessage(ctx, st, s.Id, max(1, s.LastSeq-lastAnswerWindow), s.LastSeq, func(m *castv1.Message) error {
		if m.Kind == castv1.MessageKind_MESSAGE_KIND_ASSISTANT && strings.TrimSpace(m.Text) != "" {
			last = m.Text
		}
		return nil
	})
	if err != nil {
		return ""
	}
	return validate.Clip(last, 2000) // between characters: the report must encode
}

// Parents is the turn report observer that tells a worker's parent how its
// worker did (NotifyParent); a parent that missed it hears on the worker's
// next report.
type Parents struct{ St Store }

// TurnReported implements turnstate.Observer.
func (p Parents) TurnReported(ctx context.Context, sess *castv1.Session, _ turnstate.Report) error {
	return NotifyParent(ctx, p.St, sess)
}
