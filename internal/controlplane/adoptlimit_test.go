package controlplane_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/testharness"
)

// startAdoptingNode starts a control plane (configured by cb) and a node
// adopting the Claude Code sessions in its user's folder, home.
func startAdoptingNode(t *testing.T, cb func(*controlplane.Config)) (c *client.Client, home string) {
	srv := testharness.StartControlPlane(t, cb)
	_, cfg := adoptingNode(t, srv.Addr(), nil)
	ag, _ := agents.Lookup("claude")
	return testharness.Dial(t, srv.Addr()), ag.Dir(cfg.UserEnv)
}

// adoptingNode starts node n1 of the control plane at addr, adopting the
// Claude Code sessions in its user's folder; again (a restart) when was
// is its config before: the same data folder and user.
func adoptingNode(t *testing.T, addr string, was *node.Config) (stop func(), cfg node.Config) {
	stop = testharness.StartNode(t, addr, "n1", func(c *node.Config) {
		if was != nil {
			c.DataDir, c.UserEnv, c.Agents = was.DataDir, was.UserEnv, was.Agents
		}
		c.Adopt, c.AdoptAgents, c.AdoptInterval = true, []string{"claude"}, 100*time.Millisecond
		cfg = *c
	})
	return stop, cfg
}

// claudeRecord is a Claude Code record of session id: a user's text or an
// assistant's answer.
func claudeRecord(id, kind, uuid, parent, text string) string {
	content := fmt.Sprintf("%q", text)
	if kind == "assistant" {
		content = fmt.Sprintf(`[{"type":"text","text":%q}]`, text)
	}
	return fmt.Sprintf(`{"type":%q,"uuid":%q,"parentUuid":%q,"sessionId":%q,"cwd":"/work/proj","timestamp":"2026-01-01T00:00:01Z","message":{"role":%q,"content":%s}}`+"\n",
		kind, uuid, parent, id, kind, content)
}

// A native message over the message size the control plane is configured
// with (1 MiB here, below the store's default of 8 MiB) is kept cut to
// that size, and what follows it is adopted: the node learns the limit
// from the refusal. Before, the node cut only to the default, the store
// refused the batch at every scan, and the session stayed empty.
func TestAdoptFitsTheConfiguredMessageLimit(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	c, home := startAdoptingNode(t, func(c *controlplane.Config) { c.Store.MaxMessageBytes = limit })
	const id = "5b0c6b4e-3f7e-4e34-9a51-00000000f171"
	rec := func(kind, uuid, parent, text string) string { return claudeRecord(id, kind, uuid, parent, text) }
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

// Native messages the wire or the store would refuse as they are - a tool
// input holding bytes that are not UTF-8 (a file edited by hand, a tool
// kept raw), a prompt holding a NUL (pasted binary), a first prompt with
// a terminal's colour codes (the title) - are adopted in a form they take,
// and so is everything after them. Before, the node could not encode the
// first batch (invalid UTF-8) or the control plane refused it (NUL, a
// control character in the title) at every scan, and nothing of the
// session was ever kept.
func TestAdoptKeepsWhatTheWireWouldRefuse(t *testing.T) {
	t.Parallel()
	c, home := startAdoptingNode(t, nil)
	// Each session: its odd record, then an answer that must be kept too.
	odd := map[string]string{
		"00000000f201": `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Write","input":{"content":"latin-1 caf` + "\xe9" + `"}}]}`,
		"00000000f202": `{"role":"user","content":"pasted a\u0000b"}`,
		"00000000f203": `{"role":"user","content":"\u001b[31mFAIL\u001b[0m: why?"}`,
	}
	for suffix, message := range odd {
		id := "5b0c6b4e-3f7e-4e34-9a51-" + suffix
		typ := `"user"`
		if strings.Contains(message, `"assistant"`) {
			typ = `"assistant"`
		}
		data := fmt.Sprintf(`{"type":"user","uuid":"u1","parentUuid":null,"sessionId":%q,"cwd":"/work/proj","message":{"role":"user","content":"first"}}`+"\n"+
			`{"type":%s,"uuid":"o2","parentUuid":"u1","sessionId":%q,"cwd":"/work/proj","message":%s}`+"\n"+
			`{"type":"assistant","uuid":"a3","parentUuid":"o2","sessionId":%q,"cwd":"/work/proj","message":{"role":"assistant","content":[{"type":"text","text":"LAST"}]}}`+"\n",
			id, typ, id, message, id)
		if suffix == "00000000f203" { // the odd prompt is the first: the title
			data = data[strings.IndexByte(data, '\n')+1:]
		}
		file := filepath.Join(home, "projects", "-work-proj", id+".jsonl")
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string][]string{}
	titles := map[string]string{}
	testharness.WaitFor(t, 30*time.Second, "the three adopted sessions hold their last message", func() bool {
		resp, err := c.Sessions.ListSessions(context.Background(), &castv1.ListSessionsRequest{})
		if err != nil || len(resp.Sessions) != len(odd) {
			return false
		}
		for _, s := range resp.Sessions {
			msgs, err := c.Sessions.ListMessages(context.Background(), &castv1.ListMessagesRequest{SessionId: s.Id})
			if err != nil {
				t.Fatal(err)
			}
			var rows []string
			for _, m := range msgs.Messages {
				rows = append(rows, m.Text+m.ToolCall.GetInput())
			}
			suffix := s.Origin.GetNativeId()[len("5b0c6b4e-3f7e-4e34-9a51-"):]
			got[suffix], titles[suffix] = rows, s.Title
		}
		for _, rows := range got {
			if len(rows) == 0 || rows[len(rows)-1] != "LAST" {
				return false
			}
		}
		return true
	})
	if w := []string{"first", `{"content":"latin-1 caf` + "\uFFFD" + `"}`, "LAST"}; !slices.Equal(got["00000000f201"], w) {
		t.Errorf("tool input not UTF-8: kept %q, want %q", got["00000000f201"], w)
	}
	if w := []string{"first", "pasted ab", "LAST"}; !slices.Equal(got["00000000f202"], w) {
		t.Errorf("prompt with a NUL: kept %q, want %q", got["00000000f202"], w)
	}
	if w := []string{"\x1b[31mFAIL\x1b[0m: why?", "LAST"}; !slices.Equal(got["00000000f203"], w) || titles["00000000f203"] != "[31mFAIL [0m: why?" {
		t.Errorf("colour codes in the first prompt: kept %q titled %q, want %q titled %q", got["00000000f203"], titles["00000000f203"], w, "[31mFAIL [0m: why?")
	}
}
