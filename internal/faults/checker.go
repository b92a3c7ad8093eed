// Package faults is cast's fault suite: tests that break etcd, the network
// and the node's disk under a live workload, and the checker every one of
// them ends with. The checker reads what clients were acknowledged back
// through the public API only, as a user would after the fault.
package faults

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	castretry "github.com/cast-dev/cast/internal/retry"
)

// Ack is one message a client was told was stored.
type Ack struct {
	Session  string
	ClientID string // the client_id (request_id for SendMessage)
	Seq      int64  // the seq it was acknowledged with
	Body     []byte // exactly what was sent (Body of the message)
}

// Body is the bytes of a message a client cares about: a tool result's
// output, otherwise its text.
func Body(m *castv1.Message) []byte {
	if m.Kind == castv1.MessageKind_MESSAGE_KIND_TOOL_RESULT {
		return []byte(m.GetToolResult().GetOutput())
	}
	return []byte(m.Text)
}

// Report is what the checker found for one fault.
type Report struct {
	Fault        string
	Acknowledged int
	Found        int // readable, once, byte-exact, at its acknowledged seq
	Lost         int // acknowledged, absent
	Duplicated   int // stored more than once
	Unreadable   int // its seq cannot be read back (decode or digest errors)
	Corrupt      int // read back with other bytes or at another seq
	// Problems says what went wrong, for the failure message (the first
	// ones of each kind).
	Problems []string
}

// OK is true when every acknowledged message was found and nothing else is
// wrong.
func (r Report) OK() bool {
	return r.Found == r.Acknowledged && r.Lost == 0 && r.Duplicated == 0 && r.Unreadable == 0 && r.Corrupt == 0 && len(r.Problems) == 0
}

func (r Report) String() string {
	s := fmt.Sprintf("%s: acknowledged %d, found %d, lost %d, duplicated %d, unreadable %d, corrupt %d",
		r.Fault, r.Acknowledged, r.Found, r.Lost, r.Duplicated, r.Unreadable, r.Corrupt)
	if len(r.Problems) > 0 {
		s += "\n  " + strings.Join(r.Problems, "\n  ")
	}
	return s
}

const maxProblems = 20

func (r *Report) problem(format string, args ...any) {
	if len(r.Problems) < maxProblems {
		r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
	}
}

// Claims lists, for each session, the nodes that act as its owner (from the
// nodes' own bookkeeping); the checker compares them with the control
// plane's owner.
type Claims func(ctx context.Context) (map[string][]string, error)

// Checker reads sessions back through the public API.
type Checker struct {
	Sessions castv1.SessionServiceClient
	// Claims, when set, adds the at-most-one-owner check.
	Claims Claims
	// PageSize for ListMessages; 0 is the server's default.
	PageSize int32
}

// stored is one row as read back.
type stored struct {
	seq  int64
	body []byte
}

// session is what one session read back as.
type session struct {
	byClient   map[string][]stored
	unreadable map[int64]bool
	lastSeq    int64
	owner      string
}

// Check reads every session of acks back (every page) and reports, per
// acknowledged message, whether it is there exactly once, byte-exact, at
// the seq it was acknowledged with; and for every session that its seqs
// are dense and that at most one node owns it. An error is the checker's
// own failure (the API stayed unavailable), never a finding.
func (c Checker) Check(ctx context.Context, fault string, acks []Ack) (Report, error) {
	r := Report{Fault: fault, Acknowledged: len(acks)}
	bySession := map[string][]Ack{}
	for _, a := range acks {
		bySession[a.Session] = append(bySession[a.Session], a)
	}
	ids := make([]string, 0, len(bySession))
	for id := range bySession {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	read := map[string]*session{}
	for _, id := range ids {
		s, err := c.read(ctx, id, &r)
		if err != nil {
			return r, err
		}
		read[id] = s
		for _, a := range bySession[id] {
			c.judge(&r, s, a)
		}
	}
	if c.Claims != nil {
		if err := c.checkOwners(ctx, read, &r); err != nil {
			return r, err
		}
	}
	return r, nil
}

// judge classifies one acknowledged message.
func (c Checker) judge(r *Report, s *session, a Ack) {
	rows := s.byClient[a.ClientID]
	switch {
	case len(rows) > 1:
		r.Duplicated++
		r.problem("%s %s stored %d times", a.Session, a.ClientID, len(rows))
	case len(rows) == 1 && (rows[0].seq != a.Seq || !bytes.Equal(rows[0].body, a.Body)):
		r.Corrupt++
		r.problem("%s %s acknowledged at seq %d (%d bytes), read at seq %d (%d bytes)", a.Session, a.ClientID, a.Seq, len(a.Body), rows[0].seq, len(rows[0].body))
	case len(rows) == 1:
		r.Found++
	case s.unreadable[a.Seq]:
		r.Unreadable++
		r.problem("%s %s at seq %d cannot be read", a.Session, a.ClientID, a.Seq)
	default:
		r.Lost++
		r.problem("%s %s acknowledged at seq %d is gone", a.Session, a.ClientID, a.Seq)
	}
}

// read lists the whole session page by page. A page that fails with an
// error other than unavailability is read again one seq at a time, so an
// unreadable message is pinned to its seq and the rest is still checked.
func (c Checker) read(ctx context.Context, id string, r *Report) (*session, error) {
	s := &session{byClient: map[string][]stored{}, unreadable: map[int64]bool{}}
	info, err := retry(ctx, func(ctx context.Context) (*castv1.Session, error) {
		return c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: id})
	})
	if err != nil {
		return nil, fmt.Errorf("get session %s: %w", id, err)
	}
	s.lastSeq, s.owner = info.LastSeq, info.Node
	next := int64(1)
	for next <= s.lastSeq {
		msgs, err := c.page(ctx, id, next, s.lastSeq, c.PageSize)
		if err != nil && unavailable(err) {
			return nil, fmt.Errorf("list messages of %s from %d: %w", id, next, err)
		}
		if err != nil {
			// Pin the failure to one seq and go on after it.
			one, err := c.page(ctx, id, next, next, 1)
			if err != nil && unavailable(err) {
				return nil, fmt.Errorf("read %s seq %d: %w", id, next, err)
			}
			if err != nil {
				s.unreadable[next] = true
				r.problem("%s seq %d: %v", id, next, err)
				next++
				continue
			}
			msgs = one
		}
		if len(msgs) == 0 {
			r.problem("%s: no messages from seq %d to last seq %d", id, next, s.lastSeq)
			break
		}
		for _, m := range msgs {
			if m.Seq != next {
				r.problem("%s: seq %d where %d was due (seqs not dense)", id, m.Seq, next)
			}
			next = m.Seq + 1
			if m.ClientId != "" {
				s.byClient[m.ClientId] = append(s.byClient[m.ClientId], stored{seq: m.Seq, body: Body(m)})
			}
		}
	}
	return s, nil
}

// page reads messages from start to end through the one pager
// (client.ListAll), each page retried while the control plane is
// unavailable.
func (c Checker) page(ctx context.Context, id string, start, end int64, size int32) ([]*castv1.Message, error) {
	call := func(ctx context.Context, req *castv1.ListMessagesRequest, _ ...grpc.CallOption) (*castv1.ListMessagesResponse, error) {
		return retry(ctx, func(ctx context.Context) (*castv1.ListMessagesResponse, error) {
			return c.Sessions.ListMessages(ctx, req)
		})
	}
	return client.ListAll(ctx, &castv1.ListMessagesRequest{SessionId: id, StartSeq: start, EndSeq: end, PageSize: size},
		call, (*castv1.ListMessagesResponse).GetMessages)
}

// checkOwners compares the nodes' claims with the control plane's owner.
func (c Checker) checkOwners(ctx context.Context, read map[string]*session, r *Report) error {
	claims, err := c.Claims(ctx)
	if err != nil {
		return fmt.Errorf("owner claims: %w", err)
	}
	for id, s := range read {
		nodes := claims[id]
		switch {
		case len(nodes) > 1:
			r.problem("%s is owned by %d nodes: %v", id, len(nodes), nodes)
		case len(nodes) == 1 && nodes[0] != s.owner:
			r.problem("%s: node %s acts as owner, the control plane says %s", id, nodes[0], s.owner)
		}
	}
	return nil
}

func unavailable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return true
	}
	return false
}

// retry calls fn until it succeeds or fails with an error that is not
// unavailability, by retry.FaultCheck: the checker runs after the fault
// healed, but a client may still be reconnecting.
func retry[T any](ctx context.Context, fn func(context.Context) (T, error)) (T, error) {
	return castretry.Get(ctx, castretry.FaultCheck, func() (T, error) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		v, err := fn(cctx)
		if err != nil && !unavailable(err) {
			return v, castretry.Stop(err)
		}
		return v, err
	}, nil)
}

// Table prints reports as the long mode's summary, one fault a row.
func Table(reports []Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-28s %12s %8s %6s %10s %10s %7s\n", "fault", "acknowledged", "found", "lost", "duplicated", "unreadable", "corrupt")
	for _, r := range reports {
		fmt.Fprintf(&b, "%-28s %12d %8d %6d %10d %10d %7d\n", r.Fault, r.Acknowledged, r.Found, r.Lost, r.Duplicated, r.Unreadable, r.Corrupt)
	}
	return b.String()
}

// Messages reads a whole session, every page.
func (c Checker) Messages(ctx context.Context, id string) ([]*castv1.Message, error) {
	return c.page(ctx, id, 1, 0, c.PageSize)
}

// Answered counts, for each prompt, the assistant rows that quote it. The
// fake model (internal/fakemodel) echoes the prompt it was given, so a
// prompt delivered once to the agent is answered by exactly one row: 0 is
// a message the node never ran, 2 one it ran twice.
func Answered(msgs []*castv1.Message, prompts []string) map[string]int {
	out := make(map[string]int, len(prompts))
	for _, p := range prompts {
		out[p] = 0
	}
	for _, m := range msgs {
		if m.Kind != castv1.MessageKind_MESSAGE_KIND_ASSISTANT {
			continue
		}
		for _, p := range prompts {
			if strings.Contains(m.Text, p) {
				out[p]++
			}
		}
	}
	return out
}
