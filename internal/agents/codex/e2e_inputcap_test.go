package codex

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
)

// The real Codex's cap on one turn's text, as the registry records it
// (Commands.MaxPromptChars), so a Codex that moves it fails here:
//   - `codex exec -` takes a stdin prompt of exactly the cap in characters,
//     and the model gets it whole; one character more is refused
//     (input_too_large) before any model request;
//   - the cap counts code points, not bytes;
//   - it is per turn, not per input item: app-server's turn/start with the
//     text split into two items, each well under the cap, is refused too.
func TestE2EInputCap(t *testing.T) {
	a, _ := agents.Lookup("codex")
	limit := a.Commands.MaxPromptChars
	if limit != 1<<20 {
		t.Fatalf("registry cap %d, want the 1,048,576 characters Codex %s enforces", limit, CLIVersion)
	}
	fake, bin, _, env, cwd := newCodex(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	args := []string{"exec", "--skip-git-repo-check", "--json", "-"}

	whole := strings.Repeat("é", limit-len("CAP-END\n")) + "CAP-END\n"
	agenttest.MustRunInput(t, ctx, bin, args, env, cwd, &whole)
	var got string
	for _, req := range fake.Turns() {
		for _, it := range req.Items {
			if it.Role == "user" && strings.Contains(it.Text, "CAP-END") {
				got = it.Text
			}
		}
	}
	if strings.TrimSpace(got) != strings.TrimSpace(whole) {
		t.Fatalf("the model got %d bytes of a %d-byte prompt at the cap", len(got), len(whole))
	}
	before := len(fake.Turns())
	over := strings.Repeat("x", limit+1)
	res := agenttest.RunInput(t, ctx, bin, args, env, cwd, &over)
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, "input_too_large") {
		t.Fatalf("one character over: exit %d, stderr %.400q", res.ExitCode, res.Stderr)
	}
	if len(fake.Turns()) != before {
		t.Fatal("a refused prompt reached the model")
	}

	srv, err := StartAppServer(ctx, bin, env, cwd)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var th struct {
		Thread Thread `json:"thread"`
	}
	if err := srv.Call(ctx, "thread/start", map[string]any{"cwd": cwd}, &th); err != nil {
		t.Fatal(err)
	}
	half := strings.Repeat("y", limit/2+1)
	input := []map[string]any{
		{"type": "text", "text": half, "text_elements": []any{}},
		{"type": "text", "text": half, "text_elements": []any{}},
	}
	err = srv.Call(ctx, "turn/start", map[string]any{"threadId": th.Thread.ID, "input": input}, nil)
	if err == nil || !strings.Contains(err.Error(), "maximum length") {
		t.Fatalf("two items of %d characters in one turn: %v", len(half), err)
	}
}
