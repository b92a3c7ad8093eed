package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/capability"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/testharness"
)

// What a list's -o name prints is what another command takes as its
// argument, line by line: `cast agents -o name | xargs -n1 cast ls
// --agent` (it printed agent@version, which no command takes). Every list
// command (one with --no-headers) needs a row here, so a new one is
// checked too. A consumer that reads runs against the control plane the
// list came from (exit 0); one that removes runs against an address
// nobody answers at, so its own checks of the name are all that run
// (exit 1 saying it cannot reach the control plane, not 2).
func TestListNamesAreWhatCommandsTake(t *testing.T) {
	srv := testharness.StartControlPlane(t, nil)
	addr := srv.Addr()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	testharness.StartNode(t, addr, "n1", func(c *node.Config) { c.AgentBins = map[string]string{} })
	c := testharness.Dial(t, addr)
	testharness.WaitConnected(t, c, "n1", true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	agent := capability.Agents()[0]
	// Two versions of one agent: two rows of the matrix, one agent name.
	if _, err := c.Agents.RecordAgentChecks(ctx, &castv1.RecordAgentChecksRequest{Checks: []*castv1.AgentCheck{
		{Agent: agent, Version: "1.0.0", Capability: capability.All[0], Passed: true},
		{Agent: agent, Version: "2.0.0", Capability: capability.All[0], Passed: true},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Node: "n1"}); err != nil {
		t.Fatal(err)
	}
	creds := filepath.Join(t.TempDir(), ".credentials.json")
	if err := os.WriteFile(creds, []byte(`{"claudeAiOauth":{"accessToken":"sk-ant-oat01-X","refreshToken":"sk-ant-ort01-X","expiresAt":4102444800000,"scopes":["user:inference"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	mustMain(t, addr, "account", "add", "work", "--agent", "claude", "--credentials", creds)
	mustMain(t, addr, "token", "create", "--role", "user", "--name", "alice")
	mustMain(t, addr, "config", "set-context", "lab", "--addr", addr)

	const unreachable = "127.0.0.1:1"
	type consumer struct {
		args func(name string) []string
		live bool // read-only: run against the control plane
	}
	consumers := map[string]consumer{
		"cast ls":                  {func(n string) []string { return []string{"get", n} }, true},
		"cast agents":              {func(n string) []string { return []string{"ls", "--agent", n} }, true},
		"cast nodes":               {func(n string) []string { return []string{"ls", "--node", n} }, true},
		"cast node ls":             {func(n string) []string { return []string{"ls", "--node", n} }, true},
		"cast account ls":          {func(n string) []string { return []string{"account", "rm", n, "--agent", "claude"} }, false},
		"cast token ls":            {func(n string) []string { return []string{"token", "rm", n} }, false},
		"cast config get-contexts": {func(n string) []string { return []string{"config", "get-contexts", n} }, true},
		"cast migrate ls":          {func(n string) []string { return []string{"migrate", "status", n} }, true},
		"cast worktree ls":         {func(n string) []string { return []string{"worktree", "rm", n, "--node", "n1"} }, false},
	}
	// Lists this test cannot fill without a second node (a migration) or
	// an agent's turn (a worktree): their consumer's own checks still see
	// a name of the kind their -o name prints (a migration's ULID, a path).
	examples := map[string][]string{
		"cast migrate ls":  {"01HZY3M8Q7K2N5P4R6S9T0V1WX"},
		"cast worktree ls": {"/home/me/src/app/.cast/worktrees/fix-1"},
	}
	checked := 0
	for _, cmd := range allCommands((&app{}).root()) {
		if cmd.LocalFlags().Lookup("no-headers") == nil {
			continue
		}
		path := cmd.CommandPath()
		use, ok := consumers[path]
		if !ok {
			t.Errorf("%s is a list command with no consumer of its -o name here: add the command that takes what it prints", path)
			continue
		}
		args := strings.Fields(strings.TrimPrefix(path, "cast "))
		names, live := lines(mustMain(t, addr, append(args, "-o", "name")...)), use.live
		if len(names) == 0 {
			names, live = examples[path], false
		}
		if len(names) == 0 {
			t.Errorf("%s -o name printed nothing to check", path)
		}
		seen := map[string]bool{}
		for _, n := range names {
			if seen[n] {
				t.Errorf("%s -o name printed %q twice", path, n)
			}
			seen[n] = true
			at, want := addr, 0
			if !live {
				at, want = unreachable, 1
			}
			out, errOut, code := runMain(t, at, use.args(n)...)
			checked++
			if code != want || (want == 1 && !strings.Contains(errOut, "cannot reach the control plane")) {
				t.Errorf("%s -o name printed %q, which `cast %s` does not take: exit %d, stdout %q, stderr %q", path, n, strings.Join(use.args(n), " "), code, out, errOut)
			}
		}
	}
	if checked < len(consumers) {
		t.Fatalf("checked %d names of %d lists", checked, len(consumers))
	}
}
