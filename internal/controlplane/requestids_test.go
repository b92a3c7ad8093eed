package controlplane_test

import (
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// A request id is scoped to the principal that sent it: bob reusing
// alice's request id on a create, a fork, a handoff or a migration gets
// his own new result, never alice's; alice retrying with hers still gets
// hers back. Two user tokens over real gRPC.
func TestRequestIDsAreScopedToTheirSender(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t, nil)
	testharness.StartNode(t, e.addr, "n2", nil)
	waitConnected(t, e.admin, "n2", true)
	ctx := ctxT(t)
	bobSess, err := e.bob.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp", Node: "n1"})
	must(t, err)
	own := map[string]*castv1.Session{"alice": e.aliceSess, "bob": bobSess}
	users := map[string]castv1.SessionServiceClient{"alice": e.alice.Sessions, "bob": e.bob.Sessions}
	migrations := map[string]castv1.MigrationServiceClient{"alice": e.alice.Migrations, "bob": e.bob.Migrations}

	for _, tc := range []struct {
		name string
		// do sends request id rid as user and returns the id of what it
		// made and whose it is: a new session's creator, else the session
		// it was made from.
		do    func(user, rid string) (id, of string, err error)
		bobOf string
	}{
		{"create", func(user, rid string) (string, string, error) {
			s, err := users[user].CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp", Node: "n1", RequestId: rid})
			if err != nil {
				return "", "", err
			}
			return s.Id, s.Creator, nil
		}, "user:bob"},
		{"fork", func(user, rid string) (string, string, error) {
			s, err := users[user].ForkSession(ctx, &castv1.ForkSessionRequest{SessionId: own[user].Id, RequestId: rid})
			if err != nil {
				return "", "", err
			}
			return s.Id, s.ParentId, nil
		}, bobSess.Id},
		{"handoff", func(user, rid string) (string, string, error) {
			r, err := users[user].HandoffSession(ctx, &castv1.HandoffSessionRequest{SessionId: own[user].Id, ToAgent: "codex", RequestId: rid})
			if err != nil {
				return "", "", err
			}
			return r.Session.Id, r.Session.HandoffFrom, nil
		}, bobSess.Id},
		{"migration", func(user, rid string) (string, string, error) {
			m, err := migrations[user].StartMigration(ctx, &castv1.StartMigrationRequest{SessionIds: []string{own[user].Id}, To: "n2", RequestId: rid})
			if err != nil || len(m.Sessions) != 1 {
				return "", "", err
			}
			return m.Id, m.Sessions[0].SessionId, nil
		}, bobSess.Id},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rid := "shared-" + tc.name
			aliceID, aliceOf, err := tc.do("alice", rid)
			must(t, err)
			bobID, bobOf, err := tc.do("bob", rid)
			must(t, err)
			if bobID == aliceID {
				t.Fatalf("bob's %s with alice's request id got alice's %s (of %s)", tc.name, aliceID, aliceOf)
			}
			if bobOf != tc.bobOf {
				t.Errorf("bob's %s is %s's, want %s's", tc.name, bobOf, tc.bobOf)
			}
			again, _, err := tc.do("alice", rid)
			must(t, err)
			if again != aliceID {
				t.Errorf("alice's retried %s made %s, not her first %s", tc.name, again, aliceID)
			}
		})
	}
}

// A request id its sender already used for another kind of create (a new
// session, a fork of another session) is refused, not answered with what
// the first create made: a fork handed that session went on to write its
// "Forked from" notice into it, a handoff its brief as a prompt.
func TestRequestIDReusedForAnotherCreateIsRefused(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	ctx := ctxT(t)
	newSession := func() *castv1.Session {
		s, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp", Node: "n1"})
		must(t, err)
		return s
	}
	a, b := newSession(), newSession()
	create := func(rid string) (*castv1.Session, error) {
		return c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp", Node: "n1", RequestId: rid})
	}
	fork := func(of *castv1.Session) func(string) (*castv1.Session, error) {
		return func(rid string) (*castv1.Session, error) {
			return c.Sessions.ForkSession(ctx, &castv1.ForkSessionRequest{SessionId: of.Id, RequestId: rid})
		}
	}
	for _, tc := range []struct {
		name          string
		first, second func(rid string) (*castv1.Session, error)
	}{
		{"create then fork", create, fork(a)},
		{"fork then create", fork(a), create},
		{"fork of one then fork of another", fork(a), fork(b)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rid := "reused-" + strings.ReplaceAll(tc.name, " ", "-")
			made, err := tc.first(rid)
			must(t, err)
			again, err := tc.first(rid)
			must(t, err)
			if again.Id != made.Id {
				t.Fatalf("a retry made %s, want %s back", again.Id, made.Id)
			}
			got, err := tc.second(rid)
			if status.Code(err) != codes.AlreadyExists || client.ReasonOf(err) != errs.ReasonClientIDReused {
				t.Fatalf("request id of %s reused for another create: got %v, %v; want ALREADY_EXISTS %s", made.Id, got, err, errs.ReasonClientIDReused)
			}
			after, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{SessionId: made.Id})
			must(t, err)
			if after.LastSeq != made.LastSeq {
				t.Fatalf("session %s went from %d to %d messages by a refused create", made.Id, made.LastSeq, after.LastSeq)
			}
		})
	}
}

// A create with a first message and a request id of any valid length
// stores the session with that message, once: the message's client id is
// derived from the request id, and a request id near the 128-byte cap
// must not make one the store refuses after the session is stored (the
// caller got an error, and every retry the same, over a session with no
// first message).
func TestCreateWithLongRequestIDStoresItsFirstMessage(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	ctx := ctxT(t)
	for _, n := range []int{125, 126, 128} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			rid := strings.Repeat(strconv.Itoa(n%10), n)
			create := func() *castv1.Session {
				s, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp", Node: "n1", Text: "hello", RequestId: rid})
				must(t, err)
				return s
			}
			made := create()
			if again := create(); again.Id != made.Id {
				t.Fatalf("a retry made %s, want %s back", again.Id, made.Id)
			}
			// The node may have answered meanwhile: count the user's rows.
			msgs, err := c.Sessions.ListMessages(ctx, &castv1.ListMessagesRequest{SessionId: made.Id})
			must(t, err)
			var users []string
			for _, m := range msgs.Messages {
				if m.Kind == castv1.MessageKind_MESSAGE_KIND_USER {
					users = append(users, m.Text)
				}
			}
			if len(users) != 1 || users[0] != "hello" || msgs.Messages[0].Kind != castv1.MessageKind_MESSAGE_KIND_USER {
				t.Fatalf("session %s holds user messages %q (first row %v); want its first message \"hello\" once", made.Id, users, msgs.Messages)
			}
		})
	}
}

// A create, fork or handoff retried with its request id after its node
// went down (the first answer was lost with it) gets the session it made:
// placing the retry again (or the node checks before the store's lookup)
// refused it, node not connected, though nothing needs placing.
func TestRetriedAfterItsNodeLeftGetsItsSession(t *testing.T) {
	t.Parallel()
	srv := testharness.StartControlPlane(t, nil)
	c := testharness.Dial(t, srv.Addr())
	ctx := ctxT(t)
	n := connectNode(t, ctx, c, "n1", nil)
	waitConnected(t, c, "n1", true)
	src, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp", Node: "n1", Text: "hello"})
	must(t, err)
	moves := map[string]func() (string, error){
		"create": func() (string, error) {
			s, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp", Node: "n1", Text: "hello", RequestId: "create-then-node-left"})
			return s.GetId(), err
		},
		"fork": func() (string, error) {
			s, err := c.Sessions.ForkSession(ctx, &castv1.ForkSessionRequest{SessionId: src.Id, RequestId: "fork-then-node-left"})
			return s.GetId(), err
		},
		"handoff": func() (string, error) {
			r, err := c.Sessions.HandoffSession(ctx, &castv1.HandoffSessionRequest{SessionId: src.Id, ToAgent: "codex", RequestId: "handoff-then-node-left"})
			return r.GetSession().GetId(), err
		},
	}
	made := map[string]string{}
	for name, move := range moves {
		id, err := move()
		must(t, err)
		made[name] = id
	}
	n.close()
	waitConnected(t, c, "n1", false)
	for name, move := range moves {
		if id, err := move(); err != nil || id != made[name] {
			t.Errorf("retried %s after its node left: %q, %v; want session %s", name, id, err, made[name])
		}
	}
}
