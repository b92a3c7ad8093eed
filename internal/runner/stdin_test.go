package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/runner"
	"github.com/cast-dev/cast/internal/transcript"
)

// TestPromptOnStdin: a prompt far over Linux's 128 KiB cap on one argv
// string reaches the CLI whole on its stdin and is nowhere in its argv
// (where every local user could read it in ps). The CLI is a script that
// records what it got, so only the delivery is tested here; the real CLIs
// read it in TestTurns and the e2e tests.
func TestPromptOnStdin(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := filepath.Join(dir, "claude")
	argsFile, inFile := filepath.Join(dir, "args"), filepath.Join(dir, "stdin")
	sh := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + argsFile + "\ncat > " + inFile + "\nexit 3\n"
	if err := os.WriteFile(script, []byte(sh), 0o755); err != nil {
		t.Fatal(err)
	}
	prompt := "-starts like a flag " + strings.Repeat("0123456789abcdef", 300<<10/16) + " MARK-END"
	r := &runner.Runner{Bins: map[string]string{"claude": script}}
	res, err := r.Run(context.Background(), runner.Turn{Agent: "claude", Home: t.TempDir(), Cwd: t.TempDir(), Prompt: prompt}, func(transcript.Message) {})
	if res.ExitCode != 3 || err == nil {
		t.Fatalf("the script did not run to its exit: %+v %v", res, err)
	}
	in, err := os.ReadFile(inFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(in) != prompt {
		t.Fatalf("stdin held %d bytes, want the %d-byte prompt", len(in), len(prompt))
	}
	args, err := os.ReadFile(argsFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(args), "MARK-END") || len(args) > 4096 {
		t.Fatalf("the prompt is in argv: %.200q", args)
	}
	c, err := r.CommandLine(runner.Turn{Agent: "claude", Home: t.TempDir(), Cwd: t.TempDir(), Prompt: prompt})
	if err != nil || !c.PromptOnStdin || c.Stdin != prompt || strings.Contains(strings.Join(c.Argv, " "), "MARK-END") {
		t.Fatalf("CommandLine = argv %q, on stdin %v (%d bytes), %v", c.Argv, c.PromptOnStdin, len(c.Stdin), err)
	}
}

// TestOwnBinaryNeverShadowsNode: with folders whose `node` is one of
// cast's own programs first on the turn's PATH (this very executable, as
// the node daemon's bin/; a copy of it, as bin/node seen from
// `controlplane --dev`), the agent still finds Node.js: those folders are
// left out of the agent's PATH.
func TestOwnBinaryNeverShadowsNode(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	selfDir, copyDir, nodeDir, dir := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.Symlink(self, filepath.Join(selfDir, "node")); err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(copyDir, "node"), bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(nodeDir, "node"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	script, found := filepath.Join(dir, "claude"), filepath.Join(dir, "found")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ncommand -v node > "+found+"\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := &runner.Runner{Bins: map[string]string{"claude": script}}
	for _, first := range []string{selfDir, copyDir} {
		turn := runner.Turn{Agent: "claude", Home: t.TempDir(), Cwd: t.TempDir(), Prompt: "hi",
			Env: []string{"PATH=" + strings.Join([]string{first, nodeDir, "/usr/bin", "/bin"}, string(os.PathListSeparator))}}
		_, _ = r.Run(context.Background(), turn, func(transcript.Message) {})
		got, err := os.ReadFile(found)
		if err != nil {
			t.Fatal(err)
		}
		if want := filepath.Join(nodeDir, "node"); strings.TrimSpace(string(got)) != want {
			t.Fatalf("with %s first on PATH the agent's node is %q, want %q", first, strings.TrimSpace(string(got)), want)
		}
	}
}

// TestPromptOverCLILimit: a prompt longer than the CLI reads (Gemini CLI
// cuts stdin at 8 MiB with only a debug warning) is refused before the CLI
// starts, naming the limit, never cut silently. Codex's cap on one turn
// counts characters, not bytes: a 2 MiB prompt of 1 MiB two-byte
// characters goes to it as a plain turn (a longer one goes in as history
// first: TestCodexLongPrompt).
func TestPromptOverCLILimit(t *testing.T) {
	tests := []struct {
		agent, prompt string
		refused       string // "": the CLI runs
	}{
		{"gemini", strings.Repeat("x", 8<<20+1), "reads at most 8388608"},
		{"codex", strings.Repeat("é", 1<<20), ""},
	}
	for _, tc := range tests {
		dir := t.TempDir()
		script, ran := filepath.Join(dir, tc.agent), filepath.Join(dir, "ran")
		if err := os.WriteFile(script, []byte("#!/bin/sh\ncat > /dev/null\ntouch "+ran+"\nexit 3\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		r := &runner.Runner{Bins: map[string]string{tc.agent: script}}
		res, err := r.Run(context.Background(), runner.Turn{Agent: tc.agent, Home: t.TempDir(), Cwd: t.TempDir(), Prompt: tc.prompt}, func(transcript.Message) {})
		_, statErr := os.Stat(ran)
		switch {
		case tc.refused == "" && statErr != nil:
			t.Errorf("%s, %d bytes: the CLI never ran (%+v %v)", tc.agent, len(tc.prompt), res, err)
		case tc.refused == "":
		case res.Reason != runner.ReasonRefused || err == nil || !strings.Contains(err.Error(), tc.refused):
			t.Errorf("%s, %d bytes: got %+v %v, want refused with %q", tc.agent, len(tc.prompt), res, err, tc.refused)
		case statErr == nil:
			t.Errorf("%s, %d bytes: the CLI ran with a prompt it cannot take", tc.agent, len(tc.prompt))
		}
	}
}
