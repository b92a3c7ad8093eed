package controlplane_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// A node that lost its adoption bookkeeping (killed between the control
// plane keeping a batch and its own record of it; at worst all of it) sends
// the file again from its start when it comes back: the session keeps each
// message once, a text the file holds twice twice, and what the file grew
// by meanwhile, in the same session.
func TestAdoptResentAfterTheBookkeepingIsLost(t *testing.T) {
	t.Parallel()
	srv := testharness.StartControlPlane(t, nil)
	c := testharness.Dial(t, srv.Addr())
	stop, cfg := adoptingNode(t, srv.Addr(), nil)
	const id = "5b0c6b4e-3f7e-4e34-9a51-00000000f301"
	rec := func(kind, uuid, parent, text string) string { return claudeRecord(id, kind, uuid, parent, text) }
	ag, _ := agents.Lookup("claude")
	file := filepath.Join(ag.Dir(cfg.UserEnv), "projects", "-work-proj", id+".jsonl")
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	data := rec("user", "u1", "", "hello") + rec("assistant", "a1", "u1", "yes") + rec("user", "u2", "a1", "again") + rec("assistant", "a2", "u2", "yes")
	if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	var kept []string
	held := func(n int) func() bool {
		return func() bool {
			resp, err := c.Sessions.ListSessions(context.Background(), &castv1.ListSessionsRequest{})
			if err != nil || len(resp.Sessions) == 0 {
				return false
			}
			kept = kept[:0]
			for _, s := range resp.Sessions {
				msgs, err := c.Sessions.ListMessages(context.Background(), &castv1.ListMessagesRequest{SessionId: s.Id})
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range msgs.Messages {
					kept = append(kept, s.Id+" "+m.Text)
				}
			}
			return len(kept) >= n
		}
	}
	testharness.WaitFor(t, 30*time.Second, "the file adopted", held(4))
	stop()
	if err := os.RemoveAll(filepath.Join(cfg.DataDir, "adopt")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(data+rec("user", "u3", "a2", "yes")), 0o600); err != nil {
		t.Fatal(err)
	}
	adoptingNode(t, srv.Addr(), &cfg)
	testharness.WaitFor(t, 30*time.Second, "what the file grew by adopted", held(5))
	sid := kept[0][:len(kept[0])-len(" hello")]
	want := []string{sid + " hello", sid + " yes", sid + " again", sid + " yes", sid + " yes"}
	// The resend is whole once the new message is in: a repeat would follow it.
	if !slices.Equal(kept, want) {
		t.Fatalf("kept %q, want %q", kept, want)
	}
}
