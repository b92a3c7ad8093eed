package e2e

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// `cast exec` runs one-shot turns on a node with the real CLIs: the answer
// is printed, the exit code is the agent's, -j runs prompts in parallel,
// --chain feeds each answer into the next prompt, piped stdin is read, and
// none of it shows in `cast ls`.
func TestExecOneShot(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude", "codex")
	bin := filepath.Join(testharness.Binaries(t), "cast")
	cwd := t.TempDir()
	run := func(stdin string, args ...string) (string, string, int) {
		t.Helper()
		return testharness.RunInput(t, []string{"CAST_ADDR=" + r.addr}, strings.NewReader(stdin), 3*time.Minute, bin, append([]string{"exec", "--cwd", cwd}, args...)...)
	}

	out, errOut, code := run("", "--agent", "claude", "say hi MARK-E1")
	if code != 0 || !strings.Contains(out, "MARK-E1") || !regexp.MustCompile(`^session [0-9a-z-]+ on node worker\n$`).MatchString(errOut) {
		t.Fatalf("exec claude: exit %d, out %q, err %q; want the answer, and where it ran on stderr as cast new says it", code, out, errOut)
	}
	out, _, code = run("", "--agent", "codex", "-j", "2", "first MARK-J1", "second MARK-J2")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 || !strings.Contains(lines[0], "MARK-J1") || !strings.Contains(lines[1], "MARK-J2") {
		t.Fatalf("exec -j 2: exit %d, out %q", code, out)
	}
	out, _, code = run("", "--agent", "claude", "--chain", "step one MARK-S1", "step two MARK-S2")
	if code != 0 || !strings.Contains(out, "MARK-S2") {
		t.Fatalf("exec --chain: exit %d, out %q", code, out)
	}
	turns := r.fake.Turns()
	assertItems(t, turns[len(turns)-1].Items, "MARK-S2\n\nFAKE-ANSWER") // step one's answer is piped into step two
	out, _, code = run("piped text MARK-IN", "--agent", "claude", "summarize MARK-P")
	if code != 0 || !strings.Contains(out, "MARK-IN") {
		t.Fatalf("exec with stdin: exit %d, out %q", code, out)
	}
	_, errOut, code = run("", "--agent", "cursor", "hello")
	if code == 0 || !strings.Contains(errOut, "no connected node has the cursor CLI") {
		t.Fatalf("exec on a missing CLI: exit %d, err %q", code, errOut)
	}
	// --dry-run prints the exact command line for every agent and runs
	// nothing; the five real CLIs read the prompt on stdin, never argv.
	dry := map[string]string{
		"claude": "claude -p --session-id ", "codex": "codex exec --skip-git-repo-check --json -",
		"gemini": "gemini --session-id ", "pi": "pi --session ", "opencode": "opencode run --format json",
		"grok": "grok -p 'hello world'", "cursor": "cursor-agent -p 'hello world' --output-format stream-json",
		"muse": "muse exec --json 'hello world'",
	}
	turnsBefore := len(r.fake.Turns())
	for agent, prefix := range dry {
		out, errOut, code := run("", "--agent", agent, "--dry-run", "hello world")
		onStdin := strings.HasPrefix(out, "printf %s 'hello world' | ") && strings.Count(out, "hello world") == 1
		if code != 0 || !strings.Contains(out, prefix) || !strings.Contains(out, "hello world") || onStdin != !strings.Contains(prefix, "hello world") {
			t.Errorf("exec --dry-run --agent %s: exit %d, out %q, err %q", agent, code, out, errOut)
		}
	}
	if len(r.fake.Turns()) != turnsBefore {
		t.Error("--dry-run reached the model")
	}
	list, err := r.c.Sessions.ListSessions(context.Background(), &castv1.ListSessionsRequest{})
	if err != nil || len(list.Sessions) != 0 {
		t.Fatalf("exec sessions listed: %v %v", list, err)
	}
}

// `cast exec --resume` on a session whose last turn failed answers with
// the new turn: the failure its watch first shows, still the session's
// state until the node starts the turn, is the earlier turn's. exec used
// to take it for the new turn's and exit with the old failure at once.
func TestExecResumeAfterAFailedTurn(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude")
	bin := filepath.Join(testharness.Binaries(t), "cast")
	cwd := t.TempDir()
	run := func(args ...string) (string, string, int) {
		t.Helper()
		return testharness.RunInput(t, []string{"CAST_ADDR=" + r.addr}, strings.NewReader(""), 3*time.Minute, bin, append([]string{"exec", "--cwd", cwd}, args...)...)
	}
	r.fake.FailNext(1, 400) // not retried: the turn fails
	_, errOut, code := run("--agent", "claude", "first MARK-R1")
	id := regexp.MustCompile(`^session ([0-9a-z-]+) on node worker\n`).FindStringSubmatch(errOut)
	if code == 0 || id == nil || !strings.Contains(errOut, "injected failure") {
		t.Fatalf("the failing turn: exit %d, err %q; want it failed, and where it ran", code, errOut)
	}
	out, errOut, code := run("--resume", id[1], "second MARK-R2")
	if code != 0 || !strings.Contains(out, "MARK-R2") {
		t.Fatalf("exec --resume after a failed turn: exit %d, out %q, err %q; want the new turn's answer", code, out, errOut)
	}
}
