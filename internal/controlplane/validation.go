package controlplane

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/validate"
	"github.com/cast-dev/cast/internal/wire"
)

// Handlers check every field a client sets through internal/validate (one
// table of rules); these helpers apply it to the API's compound values.

// refuse returns the first failed check as a status, or nil.
func refuse(checks ...error) error {
	for _, err := range checks {
		if err != nil {
			return toStatus(zap.NewNop(), err) // a refusal is never logged as a failure
		}
	}
	return nil
}

// maxHistoryMessages bounds CreateSession.history_messages (an import's
// row count).
const maxHistoryMessages = 1 << 24

// maxHelloSessions bounds the sessions one hello may claim; each one not
// owned costs a lookup and a ReleaseSession.
const maxHelloSessions = validate.MaxHelloSessions

// validMessages checks client-supplied transcript rows: a user row's text
// is a prompt (no NUL: agents cannot take it), other rows are agent output
// (any UTF-8). seq is assigned by the store and ignored. create_time is
// kept when set, because imports and the owner's sync carry the native
// transcript's times, but it must be a real time between 1970 and now: a
// client's import is refused otherwise, while an owner's row (a node
// whose clock runs fast) gets the server's time, so a node's sync is never
// wedged by its clock. Rows a user sends (SendMessage, CreateSession) are
// always stamped by the server.
func validMessages(msgs []*castv1.Message, limit int, owner bool) error {
	if len(msgs) == 0 {
		return invalid("no messages to append")
	}
	if len(msgs) > limit {
		return invalid("%d messages in one call; send at most %d per call", len(msgs), limit)
	}
	now := time.Now()
	for i, m := range msgs {
		if owner && m.CreateTime != nil && validTime("", m.CreateTime, now) != nil {
			m.CreateTime = timestamppb.New(now)
		}
		// Field paths are formatted only for a refusal: the checks run
		// on every append, and formatting the ten paths up front was
		// ten allocations a message. The checks are pure, so the second
		// run refuses the same field, named in full.
		if validKind(m, bareField) != nil {
			return validKind(m, messageField(i))
		}
		if err := wire.Validate(m); err != nil {
			return invalid("message %d: %v", i, err)
		}
		if validFields(m, bareField, now) != nil {
			return validFields(m, messageField(i), now)
		}
	}
	return nil
}

// bareField names a field by itself, for checks whose names show only
// when they fail.
func bareField(name string) string { return name }

// messageField names a field of the i-th message.
func messageField(i int) func(string) string { return elemField("messages", i) }

// elemField names a field of the i-th element of a request's list, as a
// refusal shows it (moves[2].cwd).
func elemField(list string, i int) func(string) string {
	return func(name string) string { return fmt.Sprintf("%s[%d].%s", list, i, name) }
}

func validKind(m *castv1.Message, f func(string) string) error {
	return refuse(validate.Enum(f("kind"), int32(m.Kind), castv1.MessageKind_name, false))
}

// validFields checks one row's fields, naming them with f.
func validFields(m *castv1.Message, f func(string) string, now time.Time) error {
	text := validate.Text
	if m.Kind == castv1.MessageKind_MESSAGE_KIND_USER {
		text = validate.Prompt
	}
	return refuse(
		validate.Need(validate.ClientID, f("client_id"), m.ClientId),
		validate.Check(text, f("text"), m.Text),
		validate.Check(validate.Name, f("notice_type"), m.NoticeType),
		validate.Check(validate.Ident, f("agent"), m.Agent),
		validate.Check(validate.Ident, f("model"), m.Model),
		validate.Check(validate.Ident, f("account"), m.Account),
		validate.Check(validate.Ident, f("native_id"), m.NativeId),
		validTool(f, m),
		validTime(f("create_time"), m.CreateTime, now),
	)
}

func validTool(f func(string) string, m *castv1.Message) error {
	if c := m.ToolCall; c != nil {
		return refuse(validate.Check(validate.Ident, f("tool_call.id"), c.Id),
			validate.Check(validate.ToolName, f("tool_call.name"), c.Name),
			validate.Check(validate.Text, f("tool_call.input"), c.Input))
	}
	if r := m.ToolResult; r != nil {
		return refuse(validate.Check(validate.Ident, f("tool_result.call_id"), r.CallId),
			validate.Check(validate.Text, f("tool_result.output"), r.Output))
	}
	return nil
}

// validTime checks an optional client-supplied timestamp.
func validTime(field string, ts *timestamppb.Timestamp, now time.Time) error {
	if ts == nil {
		return nil
	}
	if err := ts.CheckValid(); err != nil {
		return invalid("%s is not a valid timestamp: %v", field, err)
	}
	return refuse(validate.Past(field, ts.AsTime(), now))
}

// validUsage checks a node's usage report (wire.CheckWindows, which the
// node applies before sending).
func validUsage(usage []*castv1.UsageWindow) error {
	return refuse(wire.CheckWindows(usage))
}

// validReportSeqs checks a turn report's delivery cursor and held seq
// against the session's last seq: past it, every later message would
// count as delivered (or held) and never run. Seqs only grow, so a seq
// within the session when read stays so.
func (s *Server) validReportSeqs(ctx context.Context, sessionID string, delivered, held int64) error {
	if delivered == 0 && held == 0 {
		return nil
	}
	sess, err := s.store.GetSession(ctx, sessionID)
	if err != nil {
		return toStatus(s.lg, err)
	}
	return refuse(validate.Seq("delivered_seq", delivered, sess.LastSeq), validate.Seq("held_seq", held, sess.LastSeq))
}
