package agents_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents"
	_ "github.com/cast-dev/cast/internal/agents/codecs" // links the drivers
)

// Every agent whose CLI is pinned here has a driver, and only those: the
// runner refuses the others up front.
func TestVerifiedAgentsHaveDrivers(t *testing.T) {
	for _, n := range agents.Names() {
		a, _ := agents.Lookup(n)
		if _, ok := a.Driver(); ok != a.Verified {
			t.Errorf("%s: driver registered %v, verified %v", n, ok, a.Verified)
		}
	}
}

// Args builds the forms the runner runs: the registry's template, the
// usage flags only when usage is reported, then model and effort.
func TestArgs(t *testing.T) {
	vars := map[string]string{"id": "ID", "new": "NEW", "path": "/p/s.jsonl", "model": "m1", "effort": "high"}
	tests := []struct {
		agent string
		form  agents.Form
		usage bool
		want  string
	}{
		{"claude", agents.FormFresh, false, "-p --session-id ID --model m1 --effort high"},
		{"claude", agents.FormResume, true, "-p --resume ID --output-format stream-json --verbose --model m1 --effort high"},
		{"claude", agents.FormFork, false, "-p --resume ID --fork-session --session-id NEW --model m1 --effort high"},
		{"codex", agents.FormResume, true, "exec --skip-git-repo-check --json resume ID - --model m1 -c model_reasoning_effort=high"},
		{"gemini", agents.FormResume, false, "--resume ID --model m1"},
		{"pi", agents.FormResume, false, "--session /p/s.jsonl -p --model m1 --thinking high"},
		{"opencode", agents.FormFork, false, "run --format json --print-logs --log-level ERROR --session ID --fork --model m1 --variant high"},
	}
	for _, tc := range tests {
		a, _ := agents.Lookup(tc.agent)
		got, err := a.Args(tc.form, vars, tc.usage)
		if err != nil || strings.Join(got, " ") != tc.want {
			t.Errorf("%s form %d: %q, %v; want %q", tc.agent, tc.form, strings.Join(got, " "), err, tc.want)
		}
	}
	g, _ := agents.Lookup("gemini")
	if _, err := g.Args(agents.FormFork, vars, false); err == nil {
		t.Error("gemini has no fork form, Args gave one")
	}
	c, _ := agents.Lookup("claude")
	if _, err := c.Args(agents.FormFork, map[string]string{"id": "ID"}, false); err == nil {
		t.Error("a fork without {new} expanded")
	}
	var upFront []string
	for _, n := range agents.Names() {
		a, _ := agents.Lookup(n)
		if a.NeedsIDUpFront(agents.FormFresh) {
			upFront = append(upFront, n)
		}
	}
	if !slices.Equal(upFront, []string{"claude", "gemini"}) {
		t.Errorf("fresh ids up front for %v, want claude and gemini", upFront)
	}
}

// Each agent package registers its codec: every agent cast can read has a
// reader, every agent that can take over history a writer, and the others
// say why not.
func TestCodecsRegistered(t *testing.T) {
	for _, n := range agents.Names() {
		a, _ := agents.Lookup(n)
		_, rerr := agents.ReaderFor(n)
		if (rerr == nil) != (n != "cursor") {
			t.Errorf("%s: reader error %v", n, rerr)
		}
		_, werr := agents.WriterFor(n, "/bin/true", []string{})
		if (werr == nil) != a.Caps.CanReconstitute {
			t.Errorf("%s: writer error %v, CanReconstitute %v", n, werr, a.Caps.CanReconstitute)
		}
		if werr != nil && !strings.Contains(werr.Error(), "do not take over history") {
			t.Errorf("%s: %v", n, werr)
		}
	}
	if _, err := agents.ReaderFor("vim"); err == nil || !strings.Contains(err.Error(), `unknown agent "vim"`) {
		t.Errorf("unknown agent: %v", err)
	}
}

// DriverAs finds a capability only on a driver that has it: never for an
// unknown agent or one without a driver here.
func TestDriverAs(t *testing.T) {
	for _, tc := range []struct {
		agent string
		store bool
	}{
		{"opencode", true},
		{"claude", false},
		{"cursor", false}, // no driver
		{"nosuch", false},
	} {
		if _, ok := agents.DriverAs[agents.StoreLister](tc.agent); ok != tc.store {
			t.Errorf("DriverAs[StoreLister](%q) = %v, want %v", tc.agent, ok, tc.store)
		}
	}
	if l, ok := agents.DriverAs[agents.SessionLister]("claude"); !ok || l == nil {
		t.Error("claude's driver lists its session files, DriverAs[SessionLister] found none")
	}
}

// SetMCPServer (a driver's TakeMCP) adds cast's entry beside the user's
// servers, replaces an older entry of its own, and makes the map in a
// config that has none or null.
func TestSetMCPServer(t *testing.T) {
	cfg := map[string]any{"theme": "dark", "mcpServers": map[string]any{"mine": "x", "cast": "old"}}
	agents.SetMCPServer(cfg, "mcpServers", "cast", "new")
	if s, _ := cfg["mcpServers"].(map[string]any); cfg["theme"] != "dark" || len(s) != 2 || s["mine"] != "x" || s["cast"] != "new" {
		t.Errorf("with other servers: %v", cfg)
	}
	for _, cfg := range []map[string]any{{}, {"mcpServers": nil}} {
		agents.SetMCPServer(cfg, "mcpServers", "cast", "new")
		if s, _ := cfg["mcpServers"].(map[string]any); len(s) != 1 || s["cast"] != "new" {
			t.Errorf("without a map: %v", cfg)
		}
	}
}

// StoppedExit tells the exit a CLI makes when a stop signal from outside
// ends its turn (measured on the pinned CLIs: TestStopSignalMidTurn in
// the runner) from a finished turn and from the CLI's own failures, which
// keep their reading. Pi and OpenCode die of the signal or exit 128+n, so
// they need no StopExiter.
func TestStoppedExit(t *testing.T) {
	const (
		warn      = "Warning: Basic terminal detected (TERM=dumb). Visual rendering will be limited."
		claudeRes = `{"type":"system","subtype":"init","session_id":"s"}` + "\n" + `{"type":"result","subtype":"success","is_error":false,"result":"hi"}` + "\n"
		thread    = `{"type":"thread.started","thread_id":"t"}` + "\n"
	)
	for _, tc := range []struct {
		agent          string
		exit           int
		stdout, stderr string
		want           bool
	}{
		{"claude", 0, "", "", true}, // SIGINT, text mode
		{"claude", 0, `{"type":"system","subtype":"init","session_id":"s"}` + "\n", "", true}, // SIGINT, stream-json
		{"claude", 0, "Execution error", "", true},                                            // SIGINT after the abort reached the turn
		{"claude", 0, `{"type":"result","subtype":"error_during_execution","is_error":true}` + "\n", "", true},
		{"claude", 0, "the answer\n", "", false},
		{"claude", 0, "Execution error\nthe answer\n", "", false},
		{"claude", 0, claudeRes, "", false},
		{"claude", 1, "", "", false},
		{"claude", 1, "Error: unknown option '--bogus'\n", "", false},
		{"codex", 1, thread, "", true}, // SIGINT
		{"codex", 1, thread + `{"type":"turn.started"}` + "\n", "", true},
		{"codex", 1, thread + `{"type":"error","message":"stream disconnected"}` + "\n", "", false},
		{"codex", 1, thread + `{"type":"turn.failed","error":{"message":"boom"}}` + "\n", "", false},
		{"codex", 1, "", "Error: unexpected argument '--bogus' found\n", false},
		{"codex", 0, thread + `{"type":"turn.completed"}` + "\n", "", false},
		{"codex", 2, "", "", false},
		{"gemini", 0, "", warn, true}, // SIGTERM, SIGINT
		{"gemini", 0, "the answer\n", warn, false},
		{"gemini", 1, "", "Error when talking to Gemini API", false},
		{"gemini", 41, "", "", false},
		{"pi", 0, "", "", false},
		{"pi", 1, "", "", false},
		{"opencode", 0, "", "", false},
	} {
		a, _ := agents.Lookup(tc.agent)
		d, ok := a.Driver()
		if !ok {
			t.Fatalf("%s has no driver", tc.agent)
		}
		se, ok := d.(agents.StopExiter)
		if got := ok && se.StoppedExit(tc.exit, tc.stdout, tc.stderr); got != tc.want {
			t.Errorf("%s exit %d stdout %q stderr %q: stopped %v, want %v", tc.agent, tc.exit, tc.stdout, tc.stderr, got, tc.want)
		}
	}
}
