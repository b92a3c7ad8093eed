package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/testharness"
)

// diffGit runs git in dir as a test author, never with the user's config.
func diffGit(t *testing.T, dir string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=Cast Test", "-c", "user.email=test@cast.invalid", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Env = append(testharness.ScratchEnv(t), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func diffWrite(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// diffRig is an in-process control plane with one node whose agents have
// no CLI: sessions hold appended history and no turn ever runs.
func diffRig(t *testing.T) (*client.Client, string) {
	srv := testharness.StartControlPlane(t, nil)
	testharness.StartNode(t, srv.Addr(), "n1", func(c *node.Config) {
		c.AgentBins = map[string]string{} // its agents are testharness.MissingAgents
	})
	c := testharness.Dial(t, srv.Addr())
	testharness.WaitFor(t, 20*time.Second, "node connected", func() bool {
		resp, err := c.Nodes.ListNodes(context.Background(), &castv1.ListNodesRequest{})
		return err == nil && len(resp.Nodes) == 1 && resp.Nodes[0].Connected
	})
	return c, srv.Addr()
}

// historySession creates a session in cwd holding msgs as history.
func historySession(t *testing.T, c *client.Client, cwd string, msgs []*castv1.Message) *castv1.Session {
	t.Helper()
	ctx := context.Background()
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{
		Agent: "claude", Cwd: cwd, Title: "diff test", HistoryMessages: int64(len(msgs)), RequestId: fmt.Sprint("diff-", time.Now().UnixNano()),
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range msgs {
		m.ClientId = fmt.Sprintf("%s.%d", sess.Id, i)
	}
	if _, err := c.Sessions.AppendMessages(ctx, &castv1.AppendMessagesRequest{SessionId: sess.Id, Messages: msgs}); err != nil {
		t.Fatal(err)
	}
	return sess
}

func diffToolCall(id, name, input string) *castv1.Message {
	return &castv1.Message{Kind: castv1.MessageKind_MESSAGE_KIND_TOOL_CALL, Agent: "claude", ToolCall: &castv1.ToolCall{Id: id, Name: name, Input: input}}
}

func diffToolResult(id string) *castv1.Message {
	return &castv1.Message{Kind: castv1.MessageKind_MESSAGE_KIND_TOOL_RESULT, Agent: "claude", ToolResult: &castv1.ToolResult{CallId: id, Output: "ok"}}
}

// runDiff runs `cast diff ID` through diffCmd as the root command would.
func runDiff(t *testing.T, addr string, asJSON bool, args ...string) (string, error) {
	t.Helper()
	out, _, err := runSubcommand(addr, asJSON, (*app).diffCmd, args...)
	return out, err
}

// runSubcommand runs one subcommand of an app dialing addr as the root
// command would; it returns what it printed to stdout and stderr.
func runSubcommand(addr string, asJSON bool, sub func(*app) *cobra.Command, args ...string) (string, string, error) {
	var out, errOut bytes.Buffer
	a := &app{addr: addr, json: asJSON, timeout: 30 * time.Second, out: &out, errOut: &errOut}
	cmd := sub(a)
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(context.Background())
	if a.cli != nil {
		a.cli.Close()
	}
	return out.String(), errOut.String(), err
}

func TestDiffCommand(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is required for these tests; install git")
	}
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	repo := t.TempDir()
	diffGit(t, repo, nil, "init", "-q")
	diffWrite(t, repo, "main.go", "package main\n")
	diffWrite(t, repo, "old.txt", "old\n")
	diffGit(t, repo, nil, "add", "-A")
	hourAgo := fmt.Sprintf("@%d +0000", time.Now().Add(-time.Hour).Unix())
	diffGit(t, repo, []string{"GIT_AUTHOR_DATE=" + hourAgo, "GIT_COMMITTER_DATE=" + hourAgo}, "commit", "-q", "-m", "before the session")

	c, addr := diffRig(t)
	sess := historySession(t, c, repo, []*castv1.Message{
		{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "fix main and add notes"},
		diffToolCall("t1", "Read", fmt.Sprintf(`{"file_path":%q}`, filepath.Join(repo, "main.go"))),
		diffToolResult("t1"),
		diffToolCall("t2", "Edit", fmt.Sprintf(`{"file_path":%q,"old_string":"a","new_string":"b"}`, filepath.Join(repo, "main.go"))),
		diffToolResult("t2"),
		diffToolCall("t3", "Write", `{"file_path":"notes.md","content":"x"}`),
		diffToolResult("t3"),
		diffToolCall("t4", "Bash", `{"command":"git commit -am 'fix main'","description":"commit"}`),
		diffToolResult("t4"),
		diffToolCall("t5", "Edit", fmt.Sprintf(`{"file_path":%q}`, filepath.Join(repo, "main.go"))),
		diffToolResult("t5"),
		{Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Agent: "claude", Text: "done"},
	})

	// What the agent did in the workspace: one commit, then more edits.
	diffWrite(t, repo, "main.go", "package main // fixed\n")
	diffGit(t, repo, nil, "commit", "-q", "-am", "fix main")
	diffWrite(t, repo, "main.go", "package main // fixed twice\n")
	diffWrite(t, repo, "notes.md", "notes\n")
	diffGit(t, repo, nil, "rm", "-q", "old.txt")

	out, err := runDiff(t, addr, true, sess.Id)
	if err != nil {
		t.Fatal(err)
	}
	var got diffReport
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	realRepo, _ := filepath.EvalSymlinks(repo)
	if got.ID != sess.Id || got.Cwd != repo || got.RepoRoot != realRepo || got.WorkspaceError != "" {
		t.Fatalf("header fields: %s", out)
	}
	if want := []diffFile{{Path: "main.go", Status: " M"}, {Path: "old.txt", Status: "D "}, {Path: "notes.md", Status: "??"}}; !reflect.DeepEqual(got.FilesChanged, want) {
		t.Errorf("files_changed %+v, want %+v", got.FilesChanged, want)
	}
	if len(got.Commits) != 1 || got.Commits[0].Subject != "fix main" || len(got.Commits[0].Hash) != 40 || got.Commits[0].Time == "" {
		t.Errorf("commits %+v, want only the one made in the session", got.Commits)
	}
	if want := `[{"name":"Read","count":1},{"name":"Edit","count":2},{"name":"Write","count":1},{"name":"Bash","count":1}]`; diffJSONOf(t, got.Tools) != want {
		t.Errorf("tools %s, want %s", diffJSONOf(t, got.Tools), want)
	}
	if want := []string{"main.go", "notes.md"}; !reflect.DeepEqual(got.FilesTouched, want) {
		t.Errorf("files_touched %q, want %q", got.FilesTouched, want)
	}
	if want := []string{"git commit -am 'fix main'"}; !reflect.DeepEqual(got.Commands, want) {
		t.Errorf("commands %q, want %q", got.Commands, want)
	}
	// The raw JSON has every documented key, empty ones included.
	var rawKeys map[string]any
	_ = json.Unmarshal([]byte(out), &rawKeys)
	for _, k := range []string{"id", "cwd", "files_changed", "commits", "tools", "files_touched", "commands", "workspace_error"} {
		if _, ok := rawKeys[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, out)
		}
	}

	// The human summary has its sections.
	text, hint, err := runSubcommand(addr, false, (*app).diffCmd, sess.Id)
	if err != nil {
		t.Fatal(err)
	}
	// What to run next is a hint for people, on stderr.
	if !strings.Contains(hint, "`cast read "+sess.Id+"`") || strings.Contains(text, "cast read") {
		t.Errorf("the cast read hint is not on stderr alone: stdout %q, stderr %q", text, hint)
	}
	t.Logf("cast diff %s:\n%s", sess.Id, text)
	for _, want := range []string{"Files changed (3", " M main.go", "?? notes.md", "Commits (1", "fix main", "Tools used (5 calls)", "Edit", "Files touched by tools (2)", "Commands run (1)"} {
		if !strings.Contains(text, want) {
			t.Errorf("summary lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "before the session") {
		t.Errorf("summary lists a commit from before the session:\n%s", text)
	}
}

// A session whose directory is not on this machine (or not a repository)
// still gets its transcript part, with the reason and what to do.
func TestDiffWithoutWorkspace(t *testing.T) {
	c, addr := diffRig(t)
	plain := t.TempDir()
	cases := []struct {
		name, cwd, wantErr string
	}{
		{"missing", filepath.Join(plain, "elsewhere"), "does not exist on this machine; run `cast diff"},
		{"not a repository", plain, "not in a git repository"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(plain))
			sess := historySession(t, c, tc.cwd, []*castv1.Message{
				{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "list files"},
				diffToolCall("t1", "exec_command", `{"cmd":"ls -la"}`),
				diffToolResult("t1"),
			})
			out, err := runDiff(t, addr, true, sess.Id)
			if err != nil {
				t.Fatal(err)
			}
			var got diffReport
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(got.WorkspaceError, tc.wantErr) || len(got.FilesChanged) != 0 || len(got.Commits) != 0 {
				t.Fatalf("workspace part: %s", out)
			}
			if len(got.Tools) != 1 || got.Tools[0].Name != "exec_command" || !reflect.DeepEqual(got.Commands, []string{"ls -la"}) {
				t.Fatalf("transcript part: %s", out)
			}
			text, err := runDiff(t, addr, false, sess.Id)
			if err != nil || !strings.Contains(text, "Workspace: ") || !strings.Contains(text, "ls -la") {
				t.Fatalf("summary (%v):\n%s", err, text)
			}
		})
	}
	t.Run("a fork counts only its own work", func(t *testing.T) {
		parent := historySession(t, c, plain, []*castv1.Message{
			{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "start"},
			diffToolCall("p1", "Write", `{"file_path":"parent.txt"}`),
			diffToolResult("p1"),
		})
		fork, err := c.Sessions.ForkSession(context.Background(), &castv1.ForkSessionRequest{SessionId: parent.Id, RequestId: fmt.Sprint("fork-", time.Now().UnixNano())})
		if err != nil {
			t.Fatal(err)
		}
		msgs := []*castv1.Message{diffToolCall("f1", "Edit", `{"file_path":"fork.txt"}`), diffToolResult("f1")}
		for i, m := range msgs {
			m.ClientId = fmt.Sprintf("%s.f%d", fork.Id, i)
		}
		if _, err := c.Sessions.AppendMessages(context.Background(), &castv1.AppendMessagesRequest{SessionId: fork.Id, Messages: msgs}); err != nil {
			t.Fatal(err)
		}
		out, err := runDiff(t, addr, true, fork.Id)
		if err != nil {
			t.Fatal(err)
		}
		var got diffReport
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		if got.FromSeq != fork.ForkedAtSeq+1 || diffJSONOf(t, got.Tools) != `[{"name":"Edit","count":1}]` || !reflect.DeepEqual(got.FilesTouched, []string{"fork.txt"}) {
			t.Fatalf("fork at %d: %s", fork.ForkedAtSeq, out)
		}
	})
	t.Run("unknown session", func(t *testing.T) {
		if _, err := runDiff(t, addr, true, "nosuch1"); err == nil {
			t.Fatal("diff of an unknown session succeeded")
		}
	})
	t.Run("no id", func(t *testing.T) {
		_, err := runDiff(t, addr, true)
		var ue usageError
		if err == nil || !errors.As(err, &ue) {
			t.Fatalf("err %v, want a usage error", err)
		}
	})
}

func diffJSONOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
