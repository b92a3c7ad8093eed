package agents

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestRegistryComplete(t *testing.T) {
	want := []string{"claude", "codex", "cursor", "gemini", "grok", "muse", "opencode", "pi"}
	if got := Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	for _, n := range want {
		a, ok := Lookup(n)
		if !ok || a.Name != n || a.DisplayName == "" || a.Binary == "" || a.Transcript == "" || a.ContextWindow <= 0 {
			t.Errorf("%s: incomplete entry %+v", n, a)
		}
		if a.Verified && (a.NPMPackage == "" || a.Commands.Headless == nil || a.Commands.Resume == nil) {
			t.Errorf("%s: a verified agent needs its npm package and headless/resume forms", n)
		}
		if (a.Commands.Fork != nil) != (a.Caps.NativeFork != ForkNone) {
			t.Errorf("%s: fork command %v disagrees with NativeFork %s", n, a.Commands.Fork, a.Caps.NativeFork)
		}
		if (a.Commands.Effort != nil) != (len(a.Caps.EffortLevels) > 0) {
			t.Errorf("%s: effort flag %v disagrees with levels %v", n, a.Commands.Effort, a.Caps.EffortLevels)
		}
		if a.Verified && !a.Commands.PromptStdin {
			t.Errorf("%s: a verified agent takes its prompt on stdin, never argv", n)
		}
		for _, tmpl := range [][]string{a.Commands.Headless, a.Commands.Resume, a.Commands.Fork} {
			inArgv := slices.ContainsFunc(tmpl, func(s string) bool { return strings.Contains(s, "{prompt}") })
			if tmpl != nil && inArgv == a.Commands.PromptStdin {
				t.Errorf("%s: %v passes the prompt %s (PromptStdin %v)", n, tmpl, map[bool]string{true: "in argv too", false: "nowhere"}[inArgv], a.Commands.PromptStdin)
			}
		}
	}
	if _, ok := Lookup("vim"); ok {
		t.Error("Lookup of an unknown agent succeeded")
	}
}

func TestCheckTakeover(t *testing.T) {
	tests := []struct {
		target  string
		history bool
		want    string // "" = allowed
	}{
		{"claude", true, ""},
		{"codex", true, ""},
		{"gemini", true, ""},
		{"pi", true, ""},
		{"opencode", true, ""},
		{"grok", true, ""},
		{"cursor", false, ""},
		{"muse", false, ""},
		{"cursor", true, "Cursor cannot take over an existing session's history; start a new Cursor session instead"},
		{"muse", true, "Muse cannot take over an existing session's history; start a new Muse session instead"},
		{"nope", false, `unknown agent "nope"`},
	}
	for _, tc := range tests {
		err := CheckTakeover(tc.target, tc.history)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("CheckTakeover(%s, %v) = %v, want nil", tc.target, tc.history, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("CheckTakeover(%s, %v) = %v, want %q", tc.target, tc.history, err, tc.want)
		case tc.want != "" && tc.target != "nope" && (!errors.Is(err, ErrNoTakeover) || err.Error() != tc.want):
			t.Errorf("CheckTakeover(%s, %v) = %v: not exactly the ErrNoTakeover message", tc.target, tc.history, err)
		}
	}
}

func TestExpand(t *testing.T) {
	tests := []struct {
		tmpl []string
		vars map[string]string
		want []string
		err  bool
	}{
		{[]string{"-p", "{prompt}", "--resume", "{id}"}, map[string]string{"prompt": "hi; rm -rf /", "id": "u1"},
			[]string{"-p", "hi; rm -rf /", "--resume", "u1"}, false},
		{[]string{"-c", "model_reasoning_effort={effort}"}, map[string]string{"effort": "high"},
			[]string{"-c", "model_reasoning_effort=high"}, false},
		// A value that looks like a placeholder is not expanded again.
		{[]string{"{prompt}"}, map[string]string{"prompt": "{id}"}, []string{"{id}"}, false},
		{[]string{"literal {", "x}"}, nil, []string{"literal {", "x}"}, false},
		{[]string{"--resume", "{id}"}, map[string]string{}, nil, true},
	}
	for _, tc := range tests {
		got, err := Expand(tc.tmpl, tc.vars)
		if (err != nil) != tc.err || !slices.Equal(got, tc.want) {
			t.Errorf("Expand(%q) = %q, %v; want %q (err %v)", tc.tmpl, got, err, tc.want, tc.err)
		}
	}
}

// HomeVars names every variable that moves some agent's folder, so a
// process that must not see the user's agents can drop them all.
func TestHomeVars(t *testing.T) {
	want := []string{"CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME", "GROK_HOME", "PI_CODING_AGENT_DIR", "XDG_DATA_HOME"}
	if got := HomeVars(); !slices.Equal(got, want) {
		t.Fatalf("HomeVars() = %v, want %v", got, want)
	}
}
