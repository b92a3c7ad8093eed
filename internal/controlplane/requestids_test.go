package controlplane_test

import (
	"testing"

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
