package fakemodel

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// ToolTrigger in the last user text makes the default policy ask for one
// shell tool call. CMD[...] in the same text sets the command (default
// "echo hi").
const ToolTrigger = "TOOLCALL"

// Reply is one scripted answer. The zero Reply answers an empty text.
type Reply struct {
	Text string // assistant text (sent before the tool call when both are set)
	// Shell asks for the shell tool the request offers (Bash, exec_command,
	// run_shell_command, bash, ...) with this command, using that tool's own
	// argument names.
	Shell string
	Tool  *ToolCall // an explicit tool call; wins over Shell
	// Parallel > 1 asks for the tool call that many times in one answer
	// (parallel tool use, ids suffixed _1, _2, ...): a long turn in fewer
	// round trips. Anthropic only.
	Parallel int
	// Status, when not 0 or 200, fails the turn with this HTTP status.
	Status int
	// Delay holds the answer back (a slow model, or a hang for timeout
	// tests); a client that disconnects first is recorded with status 499.
	Delay time.Duration
	// Gate, when set, holds the answer until it is closed (or Delay
	// passes, when both are set): a test pins a turn mid-way, say to send
	// a message while it runs, on an event rather than a timer.
	Gate <-chan struct{}
	// InputTokens, when > 0, is the input token count the answer reports
	// instead of the fake's estimate (a quarter of the request's
	// characters): a client that compacts a history by its reported size
	// (Codex, past 90% of its fallback window of about 1 MB of text) then
	// sees a model with room for it, or, given more, one to compact now
	// (Gemini compresses past half its model's window). Anthropic,
	// Responses, Chat and Gemini.
	InputTokens int

	// reasoning is the Responses reasoning item the answer starts with
	// (SetEncryptedReasoning).
	reasoning map[string]any
}

// inputTokens is the input token count an answer to items reports.
func (r Reply) inputTokens(items []Item) int {
	if r.InputTokens > 0 {
		return r.InputTokens
	}
	return tokens(items)
}

// Repeat is n copies of r, for a long scripted turn (n tool calls).
func Repeat(n int, r Reply) []Reply {
	out := make([]Reply, n)
	for i := range out {
		out[i] = r
	}
	return out
}

// ToolCall is a tool call the fake asks for.
type ToolCall struct {
	ID    string // generated when empty
	Name  string
	Input map[string]any
	// Namespace is the tool namespace a Responses tool sits in (Codex
	// offers its sub-agent tools as the namespace multi_agent_v1).
	Namespace string
}

var cmdRe = regexp.MustCompile(`CMD\[([^\]]*)\]`)

// defaultReply is the policy when nothing is queued: answer a tool result by
// quoting it, run a shell command on the trigger word, otherwise say how many
// items arrived and echo the last user text so CLI output alone shows what
// the model received.
func defaultReply(items []Item, turn int) Reply {
	if last, ok := lastMeaningful(items); ok && last.Kind == KindToolResult {
		return Reply{Text: "FAKE: tool said " + clip(strings.TrimSpace(last.Text), 200)}
	}
	user := LastUserText(items)
	if strings.Contains(user, ToolTrigger) {
		cmd := "echo hi"
		if m := cmdRe.FindStringSubmatch(user); m != nil {
			cmd = m[1]
		}
		return Reply{Shell: cmd}
	}
	n := 0
	for _, it := range items {
		if it.Role != "system" {
			n++
		}
	}
	return Reply{Text: fmt.Sprintf("FAKE-ANSWER #%d: saw %d items; last user said: %s", turn, n, clip(user, 200))}
}

// LastUserText is the newest user text that is not context a CLI injected on
// its own (system reminders, environment and session context).
func LastUserText(items []Item) string {
	for i := len(items) - 1; i >= 0; i-- {
		it := items[i]
		if it.Role == "user" && it.Kind == KindText && !injected(it.Text) {
			return it.Text
		}
	}
	return ""
}

func lastMeaningful(items []Item) (Item, bool) {
	for i := len(items) - 1; i >= 0; i-- {
		it := items[i]
		if it.Role == "system" || (it.Kind == KindText && injected(it.Text)) {
			continue
		}
		return it, true
	}
	return Item{}, false
}

var injectedPrefixes = []string{
	"<system-reminder>", "<environment_context>", "<session_context>",
	"<skills_instructions>", "<permissions instructions>", "<user_instructions>",
}

func injected(s string) bool {
	s = strings.TrimSpace(s)
	for _, p := range injectedPrefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// resolve fills in the concrete tool call (name, argument names, id) for the
// request at hand.
func (r Reply) resolve(in map[string]any, api API, items []Item, turn int) Reply {
	if r.Tool == nil && r.Shell != "" {
		r.Tool = shellCall(in, api, r.Shell)
	}
	if r.Tool != nil {
		t := *r.Tool
		if t.ID == "" {
			t.ID = fmt.Sprintf("%s%06d", idPrefix(api), turn)
		}
		if t.Input == nil {
			t.Input = map[string]any{}
		}
		r.Tool = &t
	}
	return r
}

func idPrefix(api API) string {
	switch api {
	case Anthropic:
		return "toolu_fake"
	case Gemini:
		return "fake_call_"
	}
	return "call_fake"
}

// shellNames are the shell tools of the pinned CLIs, in preference order.
var shellNames = []string{"Bash", "exec_command", "run_shell_command", "bash", "shell"}

// shellCall builds a call to the shell tool the request offers, using the
// parameter names from its schema so the CLI's validation accepts it.
func shellCall(in map[string]any, api API, cmd string) *ToolCall {
	offered := offeredTools(in, api)
	name := ""
	for _, n := range shellNames {
		if _, ok := offered[n]; ok {
			name = n
			break
		}
	}
	if name == "" {
		name = map[API]string{Anthropic: "Bash", Responses: "exec_command", Gemini: "run_shell_command", Chat: "bash"}[api]
	}
	props := offered[name]
	input := map[string]any{}
	switch {
	case name == "shell": // old codex: argv form
		input["command"] = []string{"bash", "-lc", cmd}
	case has(props, "cmd") && !has(props, "command"):
		input["cmd"] = cmd
	default:
		input["command"] = cmd
	}
	if has(props, "description") {
		input["description"] = "Run " + cmd
	}
	return &ToolCall{Name: name, Input: input}
}

func has(m map[string]any, k string) bool {
	_, ok := m[k]
	return ok
}

// offeredTools maps each offered tool name to its parameter properties.
func offeredTools(in map[string]any, api API) map[string]map[string]any {
	out := map[string]map[string]any{}
	props := func(schema any) map[string]any {
		sm, _ := schema.(map[string]any)
		p, _ := sm["properties"].(map[string]any)
		return p
	}
	for _, t := range list(in["tools"]) {
		tm, _ := t.(map[string]any)
		switch api {
		case Anthropic:
			out[str(tm["name"])] = props(tm["input_schema"])
		case Responses:
			out[str(tm["name"])] = props(tm["parameters"])
		case Chat:
			fn, _ := tm["function"].(map[string]any)
			out[str(fn["name"])] = props(fn["parameters"])
		case Gemini:
			for _, d := range list(tm["functionDeclarations"]) {
				dm, _ := d.(map[string]any)
				schema := dm["parametersJsonSchema"]
				if schema == nil {
					schema = dm["parameters"]
				}
				out[str(dm["name"])] = props(schema)
			}
		}
	}
	return out
}

// checkPairs applies the tool pairing rule every provider enforces: each
// result answers an earlier call, and every call of an assistant step is
// answered before the conversation moves on (the next assistant text or
// call after its results, a user message, or the end). Calls are matched by
// id, or by tool name where one side carries no id (Gemini history).
func checkPairs(items []Item) error {
	type call struct{ id, name string }
	var pending []call
	sawResult := false
	unanswered := func() error {
		return fmt.Errorf("tool call %s (%s) has no result", pending[0].id, pending[0].name)
	}
	for _, it := range items {
		switch {
		case it.Kind == KindToolCall:
			if len(pending) > 0 && sawResult {
				return unanswered()
			}
			if len(pending) == 0 {
				sawResult = false
			}
			pending = append(pending, call{it.ToolCallID, it.ToolName})
		case it.Kind == KindToolResult:
			match := -1
			for i, c := range pending {
				if it.ToolCallID != "" && c.id == it.ToolCallID {
					match = i
					break
				}
			}
			if match < 0 {
				for i, c := range pending {
					if (c.id == "" || it.ToolCallID == "") && c.name == it.ToolName {
						match = i
						break
					}
				}
			}
			if match < 0 {
				return fmt.Errorf("tool result %s answers no earlier call", it.ToolCallID)
			}
			pending = append(pending[:match], pending[match+1:]...)
			sawResult = true
		case it.Role == "assistant":
			if len(pending) > 0 && sawResult {
				return unanswered()
			}
		case it.Role == "user" && it.Kind == KindText && !injected(it.Text):
			if len(pending) > 0 {
				return unanswered()
			}
		}
	}
	if len(pending) > 0 {
		return unanswered()
	}
	return nil
}
