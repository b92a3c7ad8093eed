package runner_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/runner"
)

// TestCommandLineRegistryForms covers the agents whose CLIs cannot be
// installed here: their dry-run line is the registry's form, with the model
// and effort flags appended and the extra args last. The binary is never on
// this machine's PATH under these names, so the bare name is printed.
func TestCommandLineRegistryForms(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for _, tc := range []struct {
		name string
		turn runner.Turn
		want []string
	}{
		{"grok", runner.Turn{Agent: "grok", Prompt: "hi"}, []string{"grok", "-p", "hi"}},
		{"cursor model", runner.Turn{Agent: "cursor", Prompt: "hi", Model: "gpt-5"},
			[]string{"cursor-agent", "-p", "hi", "--output-format", "stream-json", "--model", "gpt-5"}},
		{"muse", runner.Turn{Agent: "muse", Prompt: "fix the test"}, []string{"muse", "exec", "--json", "fix the test"}},
		{"muse model effort args", runner.Turn{Agent: "muse", Prompt: "x", Model: "muse-spark-1.2", Effort: "xhigh", Args: []string{"--disable-approval"}},
			[]string{"muse", "exec", "--json", "x", "--model", "muse-spark-1.2", "--reasoning-effort", "xhigh", "--disable-approval"}},
		{"grok ignores effort", runner.Turn{Agent: "grok", Prompt: "hi", Effort: "high"}, []string{"grok", "-p", "hi"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := (&runner.Runner{}).CommandLine(tc.turn)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Argv; !slices.Equal(got, tc.want) || c.PromptOnStdin {
				t.Fatalf("CommandLine = %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := (&runner.Runner{}).CommandLine(runner.Turn{Agent: "nope", Prompt: "x"}); err == nil {
		t.Fatal("unknown agent accepted")
	}
}

// TestCommandLineLongCodexPrompt: the dry run of a Codex prompt over its
// one-turn cap says it goes in as history first, and shows the turn that
// follows: a resume of that thread with the pointer, not the prompt, on
// stdin. A prompt at the cap is a plain turn.
func TestCommandLineLongCodexPrompt(t *testing.T) {
	r := &runner.Runner{}
	home, cwd := t.TempDir(), t.TempDir()
	c, err := r.CommandLine(runner.Turn{Agent: "codex", Home: home, Cwd: cwd, Prompt: strings.Repeat("x", 1<<20+1)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(c.Argv, "resume") || !slices.Contains(c.Argv, "THREAD") || !strings.Contains(c.Stdin, "<cast_large_prompt>") ||
		len(c.Stdin) > 4096 || !strings.Contains(c.Note, "app-server") || !strings.Contains(c.Note, "1048577 characters") {
		t.Fatalf("CommandLine = %q, stdin %.200q, note %q", c.Argv, c.Stdin, c.Note)
	}
	c, err = r.CommandLine(runner.Turn{Agent: "codex", Home: home, Cwd: cwd, Prompt: strings.Repeat("x", 1<<20)})
	if err != nil || slices.Contains(c.Argv, "resume") || c.Note != "" || len(c.Stdin) != 1<<20 {
		t.Fatalf("at the cap: %q, note %q, %d bytes on stdin, %v", c.Argv, c.Note, len(c.Stdin), err)
	}
}
