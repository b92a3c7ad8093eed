package controlplane_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/testharness"
)

// A native message over the message size the control plane is configured
// with (1 MiB here, below the store's default of 8 MiB) is kept cut to
// that size, and what follows it is adopted: the node learns the limit
// from the refusal. Before, the node cut only to the default, the store
// refused the batch at every scan, and the session stayed empty.
func TestAdoptFitsTheConfiguredMessageLimit(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) { c.Store.MaxMessageBytes = limit })
	c := testharness.Dial(t, srv.Addr())
	var home string
	testharness.StartNode(t, srv.Addr(), "n1", func(c *node.Config) {
		c.Adopt, c.AdoptAgents, c.AdoptInterval = true, []string{"claude"}, 100*time.Millisecond
		ag, _ := agents.Lookup("claude")
		home = ag.Dir(c.UserEnv)
	})
	const id = "5b0c6b4e-3f7e-4e34-9a51-00000000f171"
	rec := func(kind, uuid, parent, text string) string {
		content := fmt.Sprintf("%q", text)
		if kind == "assistant" {
			content = fmt.Sprintf(`[{"type":"text","text":%q}]`, text)
		}
		return fmt.Sprintf(`{"type":%q,"uuid":%q,"parentUuid":%q,"sessionId":%q,"cwd":"/work/proj","timestamp":"2026-01-01T00:00:01Z","message":{"role":%q,"content":%s}}`+"\n",
			kind, uuid, parent, id, kind, content)
	}
	file := filepath.Join(home, "projects", "-work-proj", id+".jsonl")
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("pasted log line\n", 2*limit/16) // 2 MiB
	data := rec("user", "u1", "", "hello") + rec("user", "u2", "u1", big) + rec("assistant", "a3", "u2", "seen it")
	if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}

	var texts []string
	testharness.WaitFor(t, 30*time.Second, "the adopted session holds the three messages", func() bool {
		resp, err := c.Sessions.ListSessions(context.Background(), &castv1.ListSessionsRequest{})
		if err != nil || len(resp.Sessions) != 1 {
			return false
		}
		msgs, err := c.Sessions.ListMessages(context.Background(), &castv1.ListMessagesRequest{SessionId: resp.Sessions[0].Id})
		if err != nil {
			t.Fatal(err)
		}
		texts = texts[:0]
		for _, m := range msgs.Messages {
			texts = append(texts, m.Text)
		}
		return len(texts) == 3
	})
	if texts[0] != "hello" || texts[2] != "seen it" || !strings.HasPrefix(texts[1], "pasted log line") ||
		!strings.Contains(texts[1], "left out") || len(texts[1]) > limit {
		t.Fatalf("adopted %d, %q..., %q; want the 2 MiB message cut under %d bytes, saying so", len(texts[1]), texts[0], texts[2], limit)
	}
}
