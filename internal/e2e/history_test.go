package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// A porcupine check of what API clients observe around a migration under
// faults: sends (acknowledged once, retried with a request id through
// crashes), reads of the session's owner, reads of its user messages, and
// the migration itself (from its start to its observed end). The history
// must be linearizable against a model with one owner that changes only by
// the migration's commit, and a transcript whose user messages appear
// once each, with seqs that grow in the order the sends took effect.

type histKind int

const (
	histSend histKind = iota
	histOwner
	histRead
	histMigrate
)

type histIn struct {
	Kind histKind
	Text string // send
	To   string // migrate: destination
}

type histOut struct {
	Seq       int64            // send
	Owner     string           // owner read
	Users     map[string]int64 // read: user text -> seq
	Succeeded bool             // migrate
}

type histState struct {
	owner  string
	users  map[string]int64
	maxSeq int64
}

func histModel(owner string, initial map[string]int64) porcupine.Model {
	return porcupine.Model{
		Init: func() any {
			st := histState{owner: owner, users: map[string]int64{}}
			for k, v := range initial {
				st.users[k], st.maxSeq = v, max(st.maxSeq, v)
			}
			return st
		},
		Step: func(state, input, output any) (bool, any) {
			st, in, out := state.(histState), input.(histIn), output.(histOut)
			switch in.Kind {
			case histSend:
				if seq, ok := st.users[in.Text]; ok {
					return seq == out.Seq, st // a retry returns the original
				}
				if out.Seq <= st.maxSeq {
					return false, st
				}
				next := histState{owner: st.owner, users: map[string]int64{in.Text: out.Seq}, maxSeq: out.Seq}
				for k, v := range st.users {
					next.users[k] = v
				}
				return true, next
			case histOwner:
				return out.Owner == st.owner, st
			case histRead:
				if len(out.Users) != len(st.users) {
					return false, st
				}
				for k, v := range st.users {
					if out.Users[k] != v {
						return false, st
					}
				}
				return true, st
			case histMigrate:
				if out.Succeeded {
					return true, histState{owner: in.To, users: st.users, maxSeq: st.maxSeq}
				}
				return true, st
			}
			return false, st
		},
		// States hold a map, so porcupine needs to be told how to compare them.
		Equal: func(a, b any) bool {
			x, y := a.(histState), b.(histState)
			if x.owner != y.owner || x.maxSeq != y.maxSeq || len(x.users) != len(y.users) {
				return false
			}
			for k, v := range x.users {
				if y.users[k] != v {
					return false
				}
			}
			return true
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(histIn), output.(histOut)
			switch in.Kind {
			case histSend:
				return fmt.Sprintf("send(%s) -> %d", in.Text, out.Seq)
			case histOwner:
				return "owner -> " + out.Owner
			case histRead:
				return fmt.Sprintf("read -> %v", out.Users)
			}
			return fmt.Sprintf("migrate(%s) -> %v", in.To, out.Succeeded)
		},
	}
}

// recorder collects operations with monotonic call and return times.
type recorder struct {
	mu    sync.Mutex
	start time.Time
	ops   []porcupine.Operation
}

func newRecorder() *recorder { return &recorder{start: time.Now()} }

func (r *recorder) now() int64 { return int64(time.Since(r.start)) }

func (r *recorder) add(client int, in histIn, out histOut, call int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: r.now()})
}

// observe reads the session's owner and user messages until stop closes
// (bounded by count too). A read that fails changed nothing and is left
// out; a read that succeeded is recorded with its whole interval.
func (r *recorder) observe(c *client.Client, sessionID string, stop <-chan struct{}) {
	for i := 0; i < 4000; i++ {
		select {
		case <-stop:
			return
		case <-time.After(40 * time.Millisecond):
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		call := r.now()
		if i%2 == 0 {
			s, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sessionID})
			if err == nil {
				r.add(2, histIn{Kind: histOwner}, histOut{Owner: s.Node}, call)
			}
		} else {
			resp, err := c.Sessions.ListMessages(ctx, &castv1.ListMessagesRequest{SessionId: sessionID})
			if err == nil && resp.NextPageToken == "" {
				users := map[string]int64{}
				for _, m := range resp.Messages {
					if m.Kind == castv1.MessageKind_MESSAGE_KIND_USER {
						users[m.Text] = m.Seq
					}
				}
				r.add(3, histIn{Kind: histRead}, histOut{Users: users}, call)
			}
		}
		cancel()
	}
}

// check runs porcupine over the history; on failure it logs the operations.
func (r *recorder) check(t *testing.T, model porcupine.Model) {
	t.Helper()
	r.mu.Lock()
	ops := append([]porcupine.Operation(nil), r.ops...)
	r.mu.Unlock()
	res, _ := porcupine.CheckOperationsVerbose(model, ops, 30*time.Second)
	if res != porcupine.Ok {
		sort.Slice(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
		var b strings.Builder
		for _, op := range ops {
			fmt.Fprintf(&b, "  [%d..%d] c%d %s\n", op.Call/1e6, op.Return/1e6, op.ClientId, model.DescribeOperation(op.Input, op.Output))
		}
		t.Fatalf("history of %d operations is not linearizable (%v):\n%s", len(ops), res, b.String())
	}
	t.Logf("porcupine: %d operations linearizable", len(ops))
}

// The model rejects what a broken system would show: a check that cannot
// fail proves nothing.
func TestHistoryModelRejects(t *testing.T) {
	t.Parallel()
	m := histModel("laptop", map[string]int64{"first": 1})
	op := func(c int, in histIn, out histOut, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: in, Output: out, Call: call, Return: ret}
	}
	cases := []struct {
		name string
		ops  []porcupine.Operation
		ok   bool
	}{
		{"send then read", []porcupine.Operation{
			op(0, histIn{Kind: histSend, Text: "a"}, histOut{Seq: 3}, 0, 10),
			op(1, histIn{Kind: histRead}, histOut{Users: map[string]int64{"first": 1, "a": 3}}, 11, 12)}, true},
		{"acknowledged send lost", []porcupine.Operation{
			op(0, histIn{Kind: histSend, Text: "a"}, histOut{Seq: 3}, 0, 10),
			op(1, histIn{Kind: histRead}, histOut{Users: map[string]int64{"first": 1}}, 11, 12)}, false},
		{"send stored twice", []porcupine.Operation{
			op(0, histIn{Kind: histSend, Text: "a"}, histOut{Seq: 3}, 0, 10),
			op(0, histIn{Kind: histSend, Text: "a"}, histOut{Seq: 5}, 11, 12)}, false},
		{"owner flips back", []porcupine.Operation{
			op(0, histIn{Kind: histMigrate, To: "linux"}, histOut{Succeeded: true}, 0, 10),
			op(1, histIn{Kind: histOwner}, histOut{Owner: "linux"}, 11, 12),
			op(1, histIn{Kind: histOwner}, histOut{Owner: "laptop"}, 13, 14)}, false},
		{"owner changes without a migration", []porcupine.Operation{
			op(1, histIn{Kind: histOwner}, histOut{Owner: "linux"}, 1, 2)}, false},
		{"concurrent sends and reads", []porcupine.Operation{
			op(0, histIn{Kind: histSend, Text: "a"}, histOut{Seq: 3}, 0, 10),
			op(1, histIn{Kind: histSend, Text: "b"}, histOut{Seq: 4}, 1, 9),
			op(2, histIn{Kind: histRead}, histOut{Users: map[string]int64{"first": 1, "a": 3}}, 2, 8),
			op(3, histIn{Kind: histRead}, histOut{Users: map[string]int64{"first": 1, "a": 3, "b": 4}}, 3, 11)}, true},
		{"rolled back keeps the owner", []porcupine.Operation{
			op(0, histIn{Kind: histMigrate, To: "linux"}, histOut{Succeeded: false}, 0, 10),
			op(1, histIn{Kind: histOwner}, histOut{Owner: "laptop"}, 11, 12)}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := porcupine.CheckOperations(m, tc.ops); got != tc.ok {
				t.Fatalf("linearizable = %v, want %v", got, tc.ok)
			}
		})
	}
}
