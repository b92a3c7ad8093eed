package crossagent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/agents/codecs"
	"github.com/cast-dev/cast/internal/transcript"
)

// pickerTitle starts the first thing the user asked: the title every
// agent's picker should show for a session cast rebuilt.
const pickerTitle = "Rename the widget PICKERMARK"

// pickerWait bounds each wait on a terminal; a picker shows in 2-15 s here.
const pickerWait = 60 * time.Second

func pickerConversation() []transcript.Message {
	m := func(k transcript.Kind, s string) transcript.Message {
		msg := transcript.Message{Kind: k, Text: s}
		if k != transcript.KindUser {
			msg.Agent, msg.Model = "claude", "claude-sonnet-4-5"
		}
		return msg
	}
	return []transcript.Message{
		{Kind: transcript.KindNotice, NoticeType: transcript.NoticeAgentSwitch, Text: "claude -> other"},
		m(transcript.KindUser, pickerTitle+" in the settings page"),
		m(transcript.KindAssistant, "Renamed it. PICKER-A1"),
		m(transcript.KindUser, "Thanks PICKER-U2"),
		m(transcript.KindAssistant, "You're welcome. PICKER-A2"),
	}
}

// pickerCase is how one agent's own session picker is opened in a
// terminal: the arguments, what the screen shows once the list is up,
// and for a picker behind a slash command, the command typed once the
// prompt (ready) shows.
type pickerCase struct {
	args   []string
	ready  string // the prompt before typing command ("" when args open the picker)
	typed  string
	header string // shown with the list
	setup  func(t *testing.T, c *cli)
	settle func(t *testing.T, w agents.Written) // before the command is typed
}

var pickers = map[string]pickerCase{
	"claude":   {args: []string{"--resume"}, header: "Resume session", setup: claudeInteractive},
	"codex":    {args: []string{"resume"}, header: "Resume a previous session"},
	"pi":       {args: []string{"--resume"}, header: "Resume Session"},
	"opencode": {args: []string{"session", "list"}, header: "Session ID"},
	// Gemini's picker is the /resume command of its interactive UI (the
	// --resume flag takes the latest or an id, it lists nothing).
	"gemini": {ready: "Type your message", typed: "/resume", header: "Chat Sessions", settle: geminiSummarised},
}

// TestPickerShowsRebuiltSession writes a conversation with each agent's
// native writer, the way cast export and a rebuild do, opens the agent's
// own session picker in a real terminal (tmux) with HOME and the config
// dirs in a scratch folder, and checks the session is listed under the
// user's first request. Gemini's picker would otherwise show a summary it
// asked the model for (the fake's canned answer here). Grok Build's
// picker (/resume) is not covered: its CLI ships as a binary outside npm
// and is not installed here; its writer writes the updates.jsonl Grok
// documents as what /resume replays, tested without the CLI.
func TestPickerShowsRebuiltSession(t *testing.T) {
	for _, agent := range []string{"claude", "codex", "gemini", "pi", "opencode"} {
		pc := pickers[agent]
		t.Run(agent, func(t *testing.T) {
			t.Parallel()
			slot(t)
			c := newCLI(t, agent, "picker", false)
			if pc.setup != nil {
				pc.setup(t, c)
			}
			w, err := codecs.Writer(agent, codecs.WriterOptions{Bin: c.bin, Env: c.env})
			if err != nil {
				t.Fatal(err)
			}
			tgt := agents.Target{Home: c.nativeHome(), Cwd: c.cwd, SessionID: "picker-" + agent, Model: targetModel(agent)}
			wr, err := w.Write(tgt, pickerConversation())
			if err != nil {
				t.Fatal(err)
			}
			term := agenttest.StartTerminal(t, c.bin, pc.args, c.env, c.cwd)
			if pc.typed != "" {
				term.WaitForText(pickerWait, pc.ready)
				if pc.settle != nil {
					pc.settle(t, wr)
				}
				term.Type(pc.typed)
				term.WaitForText(pickerWait, "> "+pc.typed)
				term.Send("Enter")
			}
			term.WaitForText(pickerWait, pc.header)
			term.WaitFor(pickerWait, "the session listed as "+pickerTitle, func(s string) bool {
				return listed(s, pc.header, pickerTitle)
			})
		})
	}
}

// listed reports whether a line below the picker's header holds title.
func listed(screen, header, title string) bool {
	_, list, ok := strings.Cut(screen, header)
	return ok && strings.Contains(list, title)
}

// claudeInteractive answers the first-run questions Claude Code asks in a
// terminal (onboarding, the API key, trusting the folder) in its config,
// as a user who has used it before would have.
func claudeInteractive(t *testing.T, c *cli) {
	t.Helper()
	key := agenttest.FakeAPIKey
	if len(key) > 20 {
		key = key[len(key)-20:] // Claude records the key's last 20 characters
	}
	cfg, err := json.Marshal(map[string]any{
		"hasCompletedOnboarding": true,
		"theme":                  "dark",
		"customApiKeyResponses":  map[string]any{"approved": []string{key}},
		"projects":               map[string]any{c.cwd: map[string]any{"hasTrustDialogAccepted": true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.nativeHome(), ".claude.json"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
}

// geminiSummarised waits until Gemini, on start, has given the previous
// session its picker metadata: a "$set" line appended to the file, with a
// summary it asked the model for when the file had none. Only then does
// the picker show what it will show from now on.
func geminiSummarised(t *testing.T, w agents.Written) {
	t.Helper()
	deadline := time.Now().Add(pickerWait)
	for {
		b, err := os.ReadFile(w.Path)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), `"$set"`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gemini never added its metadata to %s:\n%s", w.Path, b)
		}
		time.Sleep(100 * time.Millisecond) // a bounded poll of a file another process appends to
	}
}
