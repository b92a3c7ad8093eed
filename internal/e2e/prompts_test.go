package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/agents/opencode"
	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
	"github.com/cast-dev/cast/internal/transcript"
)

// sawWhole says whether a request gave the model a user text holding text
// whole, and returns that text's size and digest for the log.
func sawWhole(fake *fakemodel.Server, text string) (bool, string) {
	for _, req := range fake.Turns() {
		for _, it := range req.Items {
			if it.Role == "user" && strings.Contains(it.Text, text) {
				return true, fmt.Sprintf("%d bytes, sha256 %x", len(it.Text), sha256.Sum256([]byte(it.Text)))
			}
		}
	}
	return false, ""
}

// castExec runs `cast exec` with stdin piped in, as `git diff | cast exec`.
func castExec(t *testing.T, addr, cwd, stdin string, args ...string) (string, string, int) {
	t.Helper()
	return testharness.RunInput(t, []string{"CAST_ADDR=" + addr}, strings.NewReader(stdin), 4*time.Minute,
		filepath.Join(testharness.Binaries(t), "cast"), append([]string{"exec", "--cwd", cwd}, args...)...)
}

// The prompts of issue 12, on one node running the five real CLIs, with
// the node's own binary (named node) first on PATH as with bin/ first on
// a developer's PATH: `git diff | cast exec` with a 2 MB diff is answered
// by every agent (the model gets the whole diff; it reaches the CLI on
// stdin, never argv, and Codex, which takes at most 1 MiB characters in
// one turn, gets it as history through its app-server first); a session
// whose agent refused a message goes on answering the next one, without
// it, even when Codex had it in its history already; and a
// session moves into OpenCode (switch, import) with no --model.
//
// OpenCode's 2 MB diff and the moves into OpenCode run with
// CAST_MATRIX=full only (agenttest.MatrixEnv; the moves: below). The
// diff: a prompt reaches every CLI on its stdin the same way whatever its
// size (TestPromptOnStdin), the size limits cast knows are Codex's and
// Gemini's (kept), and OpenCode's turn costs ~5 of the others'.
func TestPromptsReachEveryAgent(t *testing.T) {
	t.Setenv("PATH", testharness.Binaries(t)+string(os.PathListSeparator)+os.Getenv("PATH"))
	all := []string{"claude", "codex", "gemini", "pi", "opencode"}
	// Five CLIs each reading 2 MB at once can starve the node's heartbeat
	// on a small machine for seconds: the harness's lease (TestLease) rides
	// that out.
	r := newTurnRig(t, all...)
	cwd := t.TempDir()
	start := time.Now()

	var wg sync.WaitGroup
	for _, agent := range all {
		if !agenttest.InMatrix(agent, "claude", "codex", "gemini", "pi") {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			diff := agenttest.FakeDiff(agent, 2<<20)
			out, errOut, code := castExec(t, r.addr, cwd, diff, "--agent", agent, "review this")
			if code != 0 || !strings.Contains(out, "FAKE-ANSWER") {
				t.Errorf("git diff | cast exec --agent %s (%d bytes): exit %d, out %.300q, err %.600q", agent, len(diff), code, out, errOut)
				return
			}
			ok, seen := sawWhole(r.fake, strings.TrimSpace(diff))
			if !ok {
				t.Errorf("%s: the model never got the whole %d-byte diff", agent, len(diff))
				return
			}
			t.Logf("%s: the model got the diff whole (%s)", agent, seen)
		}()
	}
	wg.Wait()
	t.Logf("the agents answered big diffs in %s", time.Since(start).Round(time.Second))
	if t.Failed() {
		return
	}

	// The model refuses a 2 MB message to Codex (HTTP 400) after cast
	// added it to Codex's history: the turn fails with the reason, a
	// notice says it was not delivered, and the session answers the next
	// message without it.
	ctx := context.Background()
	start = time.Now()
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "codex", Cwd: cwd, Text: "hello MARK-W1"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	huge := agenttest.FakeDiff("refused", 2<<20)
	r.fake.FailNext(1, 400)
	seq := r.send(sess.Id, "review this\n\n"+huge)
	failed := r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_FAILED, seq-1)
	if !strings.Contains(failed.StateReason, "400") {
		t.Fatalf("codex's refusal reads %q", failed.StateReason)
	}
	if ok, _ := sawWhole(r.fake, strings.TrimSpace(huge)); !ok {
		t.Fatal("the refused 2 MB message never reached the model whole")
	}
	assertUndelivered(t, r.messages(sess.Id), seq)
	for i, mark := range []string{"MARK-W2", "MARK-W3"} {
		next := r.send(sess.Id, "and now "+mark)
		r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, next)
		turns := r.fake.Turns()
		last := fmtItems(turns[len(turns)-1].Items)
		if !strings.Contains(last, "MARK-W1") || !strings.Contains(last, mark) || strings.Contains(last, "END-refused") {
			t.Fatalf("turn %d after the refusal: the model got %.500s", i+1, last)
		}
	}
	t.Logf("refusal and recovery in %s", time.Since(start).Round(time.Second))

	// Into OpenCode with no --model, with CAST_MATRIX=full: the default
	// run proves OpenCode's rebuild from the neutral copy (its writer and
	// `opencode import` with the turn's own HOME: the bug this pins) in
	// TestMigrateIntoOpenCode, which rebuilds the same way; a switch's and
	// an import's own parts are every agent's (TestSwitchClaudeCodexClaudeAndFork,
	// TestImportThenExportResumesInRealCLIs), and a Claude history in
	// OpenCode's writer and CLI is crossagent's rings'.
	if agenttest.FullMatrix() {
		intoOpenCode(t, r, cwd)
	}
}

// intoOpenCode moves a session into OpenCode with no --model: a switch,
// and an imported session.
func intoOpenCode(t *testing.T, r *turnRig, cwd string) {
	ctx := context.Background()
	start := time.Now()
	from, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: cwd, Text: "start on claude MARK-O1"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(from.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	if _, err := r.c.Sessions.SwitchSession(ctx, &castv1.SwitchSessionRequest{SessionId: from.Id, Agent: "opencode"}); err != nil {
		t.Fatal(err)
	}
	seq := r.send(from.Id, "now on opencode MARK-O2")
	r.waitState(from.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	assertOpenCodeAnswered(t, r, from.Id, seq, "MARK-O1", "MARK-O2")

	exp, err := opencode.Render(agents.Target{Cwd: cwd, SessionID: "imported"}, []transcript.Message{
		{Kind: transcript.KindUser, Text: "imported question MARK-I1"},
		{Kind: transcript.KindAssistant, Text: "imported answer MARK-I2"},
	}, opencode.RenderOptions{Model: opencode.ModelRef{ProviderID: agenttest.FakeProvider, ModelID: agenttest.FakeModel}})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := opencode.WriteExport(&buf, exp); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "export.json")
	must(t, os.WriteFile(file, buf.Bytes(), 0o600))
	c := cli{t: t, bin: filepath.Join(testharness.Binaries(t), "cast"), env: []string{"CAST_ADDR=" + r.addr}}
	id := strings.TrimSpace(c.must("import", "--agent", "opencode", "--cwd", cwd, file))
	seq = r.send(id, "go on MARK-I3")
	r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	assertOpenCodeAnswered(t, r, id, seq, "MARK-I1", "MARK-I3")
	t.Logf("into opencode in %s", time.Since(start).Round(time.Second))
}

// assertOpenCodeAnswered: after seq OpenCode answered, and the model got
// the history and the prompt.
func assertOpenCodeAnswered(t *testing.T, r *turnRig, id string, seq int64, marks ...string) {
	t.Helper()
	answered := false
	for _, m := range r.messages(id) {
		if m.Seq > seq && m.Kind == castv1.MessageKind_MESSAGE_KIND_ASSISTANT && m.Agent == "opencode" {
			answered = true
		}
	}
	if !answered {
		t.Fatalf("no OpenCode answer after seq %d: %s", seq, kinds(r.messages(id)))
	}
	turns := r.fake.Turns()
	for i := len(turns) - 1; i >= 0; i-- {
		if s := fmtItems(turns[i].Items); strings.Contains(s, marks[len(marks)-1]) {
			assertItems(t, turns[i].Items, marks...)
			return
		}
	}
	t.Fatalf("no model turn holds %s", marks[len(marks)-1])
}

// assertUndelivered: the thread holds an undelivered notice after seq.
func assertUndelivered(t *testing.T, msgs []*castv1.Message, seq int64) {
	t.Helper()
	for _, m := range msgs {
		if m.Seq > seq && m.Kind == castv1.MessageKind_MESSAGE_KIND_NOTICE && m.NoticeType == transcript.NoticeUndelivered && m.Text != "" {
			return
		}
	}
	t.Fatalf("no undelivered notice after seq %d in %s", seq, kinds(msgs))
}

// An OpenCode session migrates to another node with no --model: the
// destination rebuilds OpenCode's session from the neutral copy (opencode
// import, with the turn's own HOME and config dirs) and answers with the
// history.
func TestMigrateIntoOpenCode(t *testing.T) {
	t.Parallel()
	r := newMigRig(t, migOpts{}, "opencode")
	ctx := context.Background()
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "opencode", Cwd: r.repo("laptop", "o"), Node: "laptop", Text: "on laptop MARK-M1"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitSession("opencode answered on laptop", sess.Id, func(s *castv1.Session) bool {
		return s.State == castv1.SessionState_SESSION_STATE_IDLE && s.LastSeq >= 2
	})
	r.cast.must("migrate", "start", "--to", "linux", "--wait", "2m", sess.Id)
	resp, err := r.c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: sess.Id, Text: "on linux MARK-M2"})
	if err != nil {
		t.Fatal(err)
	}
	s := r.waitSession("opencode answered on linux", sess.Id, func(s *castv1.Session) bool {
		return s.State != castv1.SessionState_SESSION_STATE_RUNNING && s.DeliveredSeq >= resp.Message.Seq && s.LastSeq > resp.Message.Seq ||
			s.State == castv1.SessionState_SESSION_STATE_FAILED
	})
	if s.State != castv1.SessionState_SESSION_STATE_IDLE || s.Node != "linux" {
		t.Fatalf("after the move: %v on %q (%s)", s.State, s.Node, s.StateReason)
	}
	if n := countTurnsWith(r.fake, "MARK-M2"); n != 1 {
		t.Fatalf("MARK-M2 reached the model in %d turns", n)
	}
	for _, req := range r.fake.Turns() {
		if n := len(req.Items); n > 0 && strings.Contains(req.Items[n-1].Text, "MARK-M2") {
			assertItems(t, req.Items, "MARK-M1", "MARK-M2")
		}
	}
}
