package opencode

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/kit"
	"github.com/cast-dev/cast/internal/agents/repair"
	"github.com/cast-dev/cast/internal/shellcmd"
	"github.com/cast-dev/cast/internal/transcript"
)

// Texts the writer puts where the source had nothing: OpenCode keeps a call
// and its result in one part, so a call without a result and a result
// without a call both need an explicit stand-in.
const (
	OrphanCallOutput = repair.OrphanCallOutput
	OrphanResultName = repair.OrphanResultName
	// LeadIn opens a conversation whose first message is not the user's:
	// every OpenCode assistant message must point at a user message.
	LeadIn = "The conversation below continues from earlier history."
)

// RenderOptions are the inputs of Render besides the messages.
type RenderOptions struct {
	// Model is written on every message. OpenCode sends the next prompt
	// with the model of the last user message, so it must be a model the
	// target's OpenCode has configured.
	Model ModelRef
	// Now stamps messages without a time and seeds the ids.
	Now time.Time
}

// Render builds the export document for msgs. Thinking is left out:
// OpenCode replays a reasoning part to an OpenAI-compatible provider as
// assistant text glued to the answer, and to Anthropic without the signature
// it needs; thinking is optional for targets.
func Render(t agents.Target, msgs []transcript.Message, opt RenderOptions) (Export, error) {
	if opt.Model.ProviderID == "" || opt.Model.ModelID == "" {
		return Export{}, errors.New("opencode: render needs a provider/model")
	}
	if opt.Now.IsZero() {
		opt.Now = time.Now()
	}
	msgs = repair.UniqueCallIDs(msgs)
	// Ids start a little in the past so every id OpenCode creates on the
	// next prompt sorts after the imported ones.
	start := opt.Now.Add(-time.Duration(len(msgs)*3/0x1000+2) * time.Millisecond)
	g := newIDGen(start, t.SessionID+"\x00"+t.NativeID)
	sid := t.NativeID
	if sid == "" {
		sid = g.sessionID(opt.Now)
	} else if !strings.HasPrefix(sid, "ses_") {
		return Export{}, fmt.Errorf("opencode: native id %q is not a session id (ses_...)", sid)
	}
	r := &renderer{t: t, opt: opt, g: g, sid: sid, parts: map[string][2]int{}, placed: map[string]bool{}, callAt: map[string]int{}}
	for i, m := range msgs {
		if m.Kind == transcript.KindToolCall && m.ToolCall != nil {
			if _, ok := r.callAt[m.ToolCall.ID]; !ok {
				r.callAt[m.ToolCall.ID] = i
			}
		}
	}
	r.msgs = msgs
	for _, m := range msgs {
		if keep(m) {
			r.one(m)
		}
	}
	r.closeOrphans()
	ex := Export{
		Info: SessionInfo{ID: sid, Slug: "cast-import", Directory: t.Cwd, Title: r.title(), Version: Version,
			Time: TimeSpan{Created: opt.Now.UnixMilli(), Updated: opt.Now.UnixMilli()}},
		Messages: r.out,
	}
	return ex, Validate(ex)
}

type renderer struct {
	t      agents.Target
	opt    RenderOptions
	g      *idGen
	sid    string
	msgs   []transcript.Message
	out    []Message
	parts  map[string][2]int // call id -> index of its message in out and of the part in it
	placed map[string]bool   // call ids whose part exists
	callAt map[string]int
	user   string // id of the last user message
	// stepHasTool says the last assistant message already holds a tool
	// part (kept as a flag: scanning parts would make long tool runs
	// quadratic).
	stepHasTool bool
	// stepAnswered says a result came after the last assistant message's
	// calls: the next call is the model's next step, made after reading
	// it, so it starts a new message (in one message OpenCode replays every
	// call before any result, as parallel calls).
	stepAnswered bool
	first        string // first user text, for the title
}

// keep reports whether a neutral message is written to OpenCode at all
// (thinking never is: see Render).
func keep(m transcript.Message) bool {
	switch {
	case !repair.IsWritable(&m), m.Kind == transcript.KindThinking:
		return false
	case m.Kind == transcript.KindUser, m.Kind == transcript.KindAssistant, m.Kind == transcript.KindNotice:
		return !repair.Blank(&m)
	}
	return true
}

func (r *renderer) at(m transcript.Message) int64 {
	if m.Time.IsZero() {
		return r.opt.Now.UnixMilli()
	}
	return m.Time.UnixMilli()
}

func (r *renderer) one(m transcript.Message) {
	switch m.Kind {
	case transcript.KindUser:
		r.userMsg(r.at(m), m.Text, false)
		u := &r.out[len(r.out)-1]
		if m.Text == "" {
			// Only images: no empty text part for OpenCode to send on as
			// an empty text block, which Anthropic's API refuses.
			u.Parts = nil
		}
		u.Parts = append(u.Parts, r.fileParts(u.Info.ID, m.Images)...)
		if r.first == "" {
			r.first = m.Text
		}
	case transcript.KindNotice:
		// OpenCode's own injected context is a synthetic user part too.
		r.userMsg(r.at(m), kit.CastNotice.Wrap(m.NoticeType, m.Text), true)
	case transcript.KindAssistant:
		a := r.assistant(r.at(m), false)
		a.Parts = append(a.Parts, Part{ID: r.g.id("prt"), SessionID: r.sid, MessageID: a.Info.ID, Type: "text", Text: m.Text,
			Time: &PartTime{Start: r.at(m), End: r.at(m)}})
	case transcript.KindToolCall:
		r.call(m)
	case transcript.KindToolResult:
		r.result(m)
	}
}

func (r *renderer) userMsg(at int64, text string, synthetic bool) {
	id := r.g.id("msg")
	var parts []Part
	if text != "" { // a picture pasted alone has only its file parts
		parts = []Part{{ID: r.g.id("prt"), SessionID: r.sid, MessageID: id, Type: "text", Text: text, Synthetic: synthetic}}
	}
	r.out = append(r.out, Message{
		Info:  MessageInfo{ID: id, SessionID: r.sid, Role: "user", Time: MsgTime{Created: at}, Agent: "build", Model: &r.opt.Model},
		Parts: parts,
	})
	r.user = id
}

// assistant returns the assistant message new parts go into. A text after
// a tool part starts a new message: OpenCode stores one assistant message
// per model step, and replays a step's text before its tool calls.
func (r *renderer) assistant(at int64, forTool bool) *Message {
	if n := len(r.out); n > 0 && r.out[n-1].Info.Role == "assistant" {
		if (forTool && !r.stepAnswered) || (!forTool && !r.stepHasTool) {
			return &r.out[n-1]
		}
	}
	if r.user == "" {
		r.userMsg(at, kit.CastNotice.Wrap(transcript.NoticeHandoff, LeadIn), true)
	}
	cost := 0.0
	r.stepHasTool, r.stepAnswered = false, false
	id := r.g.id("msg")
	r.out = append(r.out, Message{Info: MessageInfo{
		ID: id, SessionID: r.sid, Role: "assistant", Time: MsgTime{Created: at, Completed: &at}, Agent: "build",
		ParentID: r.user, Mode: "build", Path: &Path{Cwd: r.t.Cwd, Root: r.t.Cwd}, Cost: &cost, Tokens: &Tokens{},
		ModelID: r.opt.Model.ModelID, ProviderID: r.opt.Model.ProviderID, Finish: "stop",
	}})
	return &r.out[len(r.out)-1]
}

func (r *renderer) call(m transcript.Message) {
	if r.placed[m.ToolCall.ID] {
		return // placed early for a result that came first, or a duplicate
	}
	r.placed[m.ToolCall.ID] = true
	name, input := renderCall(m.ToolCall.Name, m.ToolCall.Input)
	a := r.assistant(r.at(m), true)
	a.Info.Finish = "tool-calls"
	r.stepHasTool = true
	at := r.at(m)
	a.Parts = append(a.Parts, Part{ID: r.g.id("prt"), SessionID: r.sid, MessageID: a.Info.ID, Type: "tool", Tool: name, CallID: m.ToolCall.ID,
		State: &ToolState{Status: "pending", Input: input, Title: title(input), Time: &PartTime{Start: at, End: at}}})
	// Indices, not pointers: appending to out moves the messages.
	r.parts[m.ToolCall.ID] = [2]int{len(r.out) - 1, len(a.Parts) - 1}
}

func (r *renderer) part(callID string) *Part {
	ix, ok := r.parts[callID]
	if !ok {
		return nil
	}
	return &r.out[ix[0]].Parts[ix[1]]
}

func (r *renderer) result(m transcript.Message) {
	res := m.ToolResult
	if !r.placed[res.CallID] {
		if ci, ok := r.callAt[res.CallID]; ok {
			r.call(r.msgs[ci]) // the call comes later in the source
		} else {
			r.call(transcript.Message{Kind: transcript.KindToolCall, Time: m.Time,
				ToolCall: &transcript.ToolCall{ID: res.CallID, Name: OrphanResultName, Input: repair.OrphanResultArgs}})
		}
	}
	p := r.part(res.CallID)
	if p == nil || p.State.Status != "pending" {
		return // a second result for one call
	}
	r.stepAnswered = true
	st := p.State
	st.Time.End = r.at(m)
	if res.ExitCode != nil {
		st.Metadata = json.RawMessage(fmt.Sprintf(`{"exit":%d}`, *res.ExitCode))
	}
	if res.IsError {
		st.Status, st.Error = "error", res.Output
		return
	}
	st.Status, st.Output = "completed", res.Output
	st.Attachments = r.fileParts(r.out[r.parts[res.CallID][0]].Info.ID, m.Images)
}

// fileParts are images as OpenCode file parts of message msgID, their
// bytes in a data URL (as OpenCode stores a pasted image).
func (r *renderer) fileParts(msgID string, images []transcript.Image) []Part {
	var out []Part
	for i, im := range images {
		ext := strings.TrimPrefix(im.MediaType, "image/")
		out = append(out, Part{ID: r.g.id("prt"), SessionID: r.sid, MessageID: msgID, Type: "file",
			Mime: im.MediaType, Filename: fmt.Sprintf("image-%d.%s", i+1, ext), URL: kit.DataURL(im)})
	}
	return out
}

// closeOrphans turns calls that never got a result into errors saying so.
func (r *renderer) closeOrphans() {
	for i := range r.out {
		for j := range r.out[i].Parts {
			if st := r.out[i].Parts[j].State; st != nil && st.Status == "pending" {
				st.Status, st.Error = "error", OrphanCallOutput
			}
		}
	}
}

func (r *renderer) title() string {
	t := strings.TrimSpace(r.first)
	if i := strings.IndexByte(t, '\n'); i >= 0 {
		t = t[:i]
	}
	if t == "" {
		return "cast session"
	}
	if utf8.RuneCountInString(t) > 60 {
		t = string([]rune(t)[:60]) + "…"
	}
	return t
}

// title is the label OpenCode shows for a tool part: the command for a
// shell call, else empty.
func title(input json.RawMessage) string {
	var v struct {
		Command string `json:"command"`
	}
	_ = json.Unmarshal(input, &v)
	return v.Command
}

// foreignShells are other agents' shell tools, rendered as OpenCode's own
// bash tool so the model reads them as the tool it has.
var foreignShells = map[string]bool{
	"bash": true, "exec_command": true, "shell": true, "local_shell": true, "shell_command": true,
	"run_shell_command": true, "run_terminal_cmd": true, "execute_command": true,
}

// renderCall maps a neutral call to an OpenCode tool name and input object.
func renderCall(name, input string) (string, json.RawMessage) {
	obj := map[string]any{}
	in := strings.TrimSpace(input)
	if in != "" && json.Unmarshal([]byte(in), &obj) != nil {
		var v any
		if json.Unmarshal([]byte(in), &v) != nil {
			v = input
		}
		// Tool input is an object in OpenCode; free-form input (a patch)
		// or any other value is kept whole under one key.
		obj = map[string]any{"input": v}
	}
	if foreignShells[strings.ToLower(name)] {
		if cmd, ok := shellcmd.Of(obj); ok {
			args := map[string]any{"command": cmd}
			for _, k := range []string{"description", "timeout"} {
				if v, ok := obj[k]; ok {
					args[k] = v
				}
			}
			for _, k := range []string{"workdir", "cwd", "directory", "dir_path"} {
				if d, ok := obj[k].(string); ok && d != "" {
					args["workdir"] = d
					break
				}
			}
			return "bash", marshal(args)
		}
	}
	n := repair.FunctionChars(name, "_-")
	if strings.HasPrefix(in, "{") && json.Valid([]byte(in)) {
		return n, json.RawMessage(in)
	}
	return n, marshal(obj)
}
