package runner

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/claude"
	"github.com/cast-dev/cast/internal/agents/codex"
	"github.com/cast-dev/cast/internal/agents/gemini"
	"github.com/cast-dev/cast/internal/agents/opencode"
	"github.com/cast-dev/cast/internal/agents/pi"
	"github.com/cast-dev/cast/internal/quota"
	"github.com/cast-dev/cast/internal/transcript"
)

// driver is what differs between agents: the command line, where the
// native session is, and what stdout carries.
type driver struct {
	a     agents.Agent
	t     Turn
	home  string // the agent's own folder (NativeHome)
	fresh bool
	// fork: the turn runs in a native fork of forkID (file forkPath); id
	// and path name the new session once the CLI made it.
	fork             bool
	forkID, forkPath string

	mu   sync.Mutex
	id   string // native session id (known up front, or from stdout)
	path string // native transcript

	tail *tailer // file-backed agents
	logf func(string, ...any)

	// stdout-derived (codex --json, opencode --format json)
	streamErrs []string
	streamed   map[string]bool         // opencode: NativeIDs emitted from the stream
	sawOutput  bool                    // opencode: any part streamed
	limits     map[string]quota.Window // claude stream-json: rate_limit_event by type

	// large is the turn's stdin when the prompt itself went in as history
	// (deliverLarge): a short pointer to it.
	large string
}

func newDriver(a agents.Agent, t Turn, logf func(string, ...any)) (*driver, error) {
	env := buildEnv(a, t)
	d := &driver{a: a, t: t, fresh: t.NativeID == "" && t.NativePath == "", id: t.NativeID, path: t.NativePath, logf: logf}
	if t.ForkOf != "" || t.ForkPath != "" {
		d.fork, d.fresh, d.id, d.path = true, false, "", ""
	}
	switch a.Name {
	case "claude", "codex", "pi", "gemini", "opencode":
		d.home = AgentDir(a, env)
	default:
		return nil, &Error{Reason: ReasonUnsupported, Detail: fmt.Sprintf("%s turns are not supported by the runner", a.DisplayName)}
	}
	if d.fork {
		if err := d.forkSource(); err != nil {
			return nil, err
		}
	}
	var reader agents.Reader
	switch a.Name {
	case "claude":
		reader = claude.Reader{}
		if d.fresh || d.fork {
			// A fork gets its new id up front too (--session-id), so the
			// runner knows which file is the fork's.
			d.id = uuid.NewString()
		} else if d.id == "" {
			d.id = strings.TrimSuffix(filepath.Base(d.path), ".jsonl")
		}
	case "codex":
		reader = codex.Reader{}
		if !d.fresh && d.id == "" {
			d.id = idFromRollout(d.path)
		}
	case "gemini":
		reader = gemini.Reader{}
		if d.fresh {
			d.id = uuid.NewString()
		} else if d.id == "" {
			d.id = headerField(d.path, "sessionId")
		}
	case "pi":
		reader = pi.Reader{}
		if d.fresh {
			// `pi --session F` starts a new session in F when F does not
			// exist: the runner picks F (in pi's own folder for the cwd,
			// named the way pi names its files) so parallel fresh turns in
			// one cwd cannot be mixed up. pi puts its own id in the header.
			d.path = filepath.Join(pi.SessionDir(d.home, t.Cwd),
				strings.NewReplacer(":", "-", ".", "-").Replace(time.Now().UTC().Format("2006-01-02T15:04:05.000Z"))+"_"+uuid.NewString()+".jsonl")
		} else if d.id == "" {
			d.id = headerField(d.path, "id")
		}
	case "opencode":
		d.streamed = map[string]bool{}
		if !d.fresh && d.id == "" {
			return nil, &Error{Reason: ReasonNoSession, Detail: "opencode resumes by session id: Turn.NativeID is empty"}
		}
		d.path = opencode.DBPath(d.home)
		return d, nil
	}
	if !d.fresh && !d.fork && d.id == "" && d.path == "" {
		return nil, &Error{Reason: ReasonNoSession, Detail: "no native id or path to resume"}
	}
	d.tail = &tailer{reader: reader, prompt: t.Prompt, logf: logf}
	switch a.Name {
	// Append-only during a turn: parse only what the turn adds. (Gemini
	// rewrites and upserts records, so it is always read whole.)
	case "claude":
		d.tail.parse = func(b []byte) ([]transcript.Message, error) {
			// A suffix's first record points at a parent before it: the
			// Reader then keeps the records in file order, as Claude does.
			msgs, _, err := claude.Parse(bytes.NewReader(b))
			return msgs, err
		}
	case "pi":
		d.tail.parse = func(b []byte) ([]transcript.Message, error) {
			dec, err := pi.Decode(b) // the chain stops at the old leaf
			return dec.Messages, err
		}
	case "codex":
		d.tail.parse = func(b []byte) ([]transcript.Message, error) {
			p, err := codex.Parse(bytes.NewReader(b))
			return p.Messages, err
		}
		d.tail.fixIDs = shiftLineIDs
	}
	return d, nil
}

// args is the CLI's argument list for this turn, from the registry's
// templates plus the output flags the runner relies on.
func (d *driver) args() ([]string, error) {
	c := d.a.Commands
	d.mu.Lock()
	vars := map[string]string{"prompt": cliPrompt(d.a, d.t.Prompt), "id": d.id, "path": d.path, "model": d.t.Model, "effort": d.t.Effort, "new": d.id}
	d.mu.Unlock()
	var tmpl []string
	switch {
	case d.fork:
		tmpl, vars["id"], vars["path"] = c.Fork, d.forkID, d.forkPath
	case d.fresh && d.a.Name == "pi":
		tmpl = c.Resume // --session {path} with a path that does not exist yet
	case d.fresh:
		tmpl = c.Headless
	case d.a.Name == "gemini":
		// --session-file copies the file into a new session each time;
		// --resume (run in the same cwd) appends to it. The prompt is on
		// stdin.
		tmpl = []string{"--resume", "{id}"}
	default:
		tmpl = c.Resume
	}
	if tmpl == nil {
		return nil, fmt.Errorf("%s has no headless command", d.a.DisplayName)
	}
	if d.a.Name == "pi" && !d.fresh && d.path == "" {
		vars["path"] = d.id // pi --session takes a file or an id
	}
	args, err := agents.Expand(tmpl, vars)
	if err != nil {
		return nil, err
	}
	if d.fork && d.a.Name == "claude" {
		args = append(args, "--session-id", vars["new"])
	}
	if d.a.Name == "claude" && d.t.ReportUsage {
		// Its usage windows appear only as stream-json events; messages
		// still come from the transcript file.
		args = append(args, "--output-format", "stream-json", "--verbose")
	}
	if d.a.Name == "opencode" {
		// Parts stream as JSON events; errors go to stderr.
		args = append([]string{args[0], "--format", "json", "--print-logs", "--log-level", "ERROR"}, args[1:]...)
	}
	if d.t.Model != "" && c.Model != nil {
		m, err := agents.Expand(c.Model, vars)
		if err != nil {
			return nil, err
		}
		args = append(args, m...)
	}
	if d.t.Effort != "" && c.Effort != nil {
		e, err := agents.Expand(c.Effort, vars)
		if err != nil {
			return nil, err
		}
		args = append(args, e...)
	}
	return args, nil
}

// baseline runs before the process starts.
func (d *driver) baseline() {
	if d.tail == nil {
		return
	}
	if d.a.Name == "pi" && d.fresh {
		if err := os.MkdirAll(filepath.Dir(d.path), 0o700); err != nil {
			d.logf("runner: %v", err)
		}
	}
	if d.fork {
		d.tail.baselineFrom(d.forkPath)
		return
	}
	if !d.fresh {
		d.locate()
		d.tail.path = d.path
		d.tail.baseline()
	}
}

// locate finds the native transcript file once its id is known.
func (d *driver) locate() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.path != "" {
		if _, err := os.Stat(d.path); err == nil || !d.fresh || d.a.Name == "pi" {
			return
		}
	}
	d.path = d.find(d.id)
}

// find is the native transcript file of session id under the agent's
// folder ("" when there is none).
func (d *driver) find(id string) string {
	switch d.a.Name {
	case "claude":
		if id != "" {
			return firstGlob(filepath.Join(d.home, "projects", "*", id+".jsonl"))
		}
	case "codex":
		if id != "" {
			if p := firstGlob(filepath.Join(d.home, "sessions", "*", "*", "*", "rollout-*-"+id+".jsonl")); p != "" {
				return p
			}
			return firstGlob(filepath.Join(d.home, "sessions", "rollout-*-"+id+".jsonl"))
		}
	case "gemini":
		if len(id) >= 8 {
			return geminiFile(filepath.Join(d.home, "tmp", "*", "chats", "session-*-"+id[:8]+".jsonl"), id)
		}
	case "pi":
		if id != "" {
			if p := firstGlob(filepath.Join(d.home, "sessions", "*", "*_"+id+".jsonl")); p != "" {
				return p
			}
			return piByHeader(filepath.Join(d.home, "sessions", "*", "*.jsonl"), id)
		}
	}
	return ""
}

// sync emits what is new in the native transcript.
func (d *driver) sync(final bool, out func(transcript.Message)) {
	if d.tail == nil {
		return
	}
	if d.tail.path == "" {
		d.locate()
		d.mu.Lock()
		d.tail.path = d.path
		d.mu.Unlock()
		if d.tail.path == "" {
			return
		}
	}
	d.tail.poll(final, out)
}

func (d *driver) native() (string, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.a.Name == "opencode" {
		return d.id, d.path
	}
	if d.path != "" {
		if _, err := os.Stat(d.path); err != nil {
			return "", "" // no session was written (failed before the first entry)
		}
	}
	if d.path == "" {
		return "", ""
	}
	if d.a.Name == "pi" && d.id == "" {
		d.id = headerField(d.path, "id")
	}
	return d.id, d.path
}

func (d *driver) promptSeen() bool {
	if d.tail == nil {
		return d.a.Name == "opencode" && d.sawOutput // the stream never repeats the prompt
	}
	return d.tail.state == promptFound
}

// readStdout consumes the CLI's stdout to the end.
func (d *driver) readStdout(r io.Reader, keep io.Writer, out func(transcript.Message)) {
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			_, _ = keep.Write(line)
			d.stdoutLine(bytes.TrimSpace(line), out)
		}
		if err != nil {
			return
		}
	}
}

func (d *driver) stdoutLine(line []byte, out func(transcript.Message)) {
	if len(line) == 0 || line[0] != '{' {
		return
	}
	switch d.a.Name {
	case "codex":
		var ev struct {
			Type     string `json:"type"`
			ThreadID string `json:"thread_id"`
			Message  string `json:"message"`
			Error    *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(line, &ev) != nil {
			return
		}
		switch ev.Type {
		case "thread.started":
			d.mu.Lock()
			if d.id == "" {
				d.id = ev.ThreadID
			}
			d.mu.Unlock()
		case "error":
			d.addStreamErr(ev.Message)
		case "turn.failed":
			if ev.Error != nil {
				d.addStreamErr(ev.Error.Message)
			}
		}
	case "opencode":
		d.opencodeEvent(line, out)
	case "claude":
		d.claudeEvent(line)
	}
}

func (d *driver) addStreamErr(s string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s != "" && len(d.streamErrs) < 20 {
		d.streamErrs = append(d.streamErrs, s)
	}
}

// opencodeEvent maps one `opencode run --format json` event. Text parts
// arrive complete and tool parts once they finished, in the shape
// `opencode export` uses, so OpenCode's own Reader maps them (and gives the
// same NativeIDs an export would).
func (d *driver) opencodeEvent(line []byte, out func(transcript.Message)) {
	var ev struct {
		Type      string          `json:"type"`
		SessionID string          `json:"sessionID"`
		Part      *opencode.Part  `json:"part"`
		Error     json.RawMessage `json:"error"`
	}
	if json.Unmarshal(line, &ev) != nil {
		return
	}
	if ev.SessionID != "" {
		d.mu.Lock()
		if d.id == "" {
			d.id = ev.SessionID
		}
		d.mu.Unlock()
	}
	if ev.Type == "error" {
		d.addStreamErr(string(ev.Error))
		return
	}
	if ev.Part == nil {
		return
	}
	switch ev.Part.Type {
	case "text", "reasoning", "tool":
	default:
		return
	}
	ex := opencode.Export{
		Info:     opencode.SessionInfo{ID: ev.Part.SessionID},
		Messages: []opencode.Message{{Info: opencode.MessageInfo{ID: ev.Part.MessageID, SessionID: ev.Part.SessionID, Role: "assistant"}, Parts: []opencode.Part{*ev.Part}}},
	}
	raw, err := json.Marshal(ex)
	if err != nil {
		return
	}
	p, err := opencode.Parse(bytes.NewReader(raw))
	if err != nil {
		return
	}
	for _, m := range p.Messages {
		if d.streamed[m.NativeID] {
			continue
		}
		d.streamed[m.NativeID] = true
		d.sawOutput = true
		out(m)
	}
}

// firstGlob returns the newest match of pattern ("" when none).
func firstGlob(pattern string) string {
	m, _ := filepath.Glob(pattern)
	if len(m) == 0 {
		return ""
	}
	sort.Slice(m, func(i, j int) bool { return modTime(m[i]) > modTime(m[j]) })
	return m[0]
}

func modTime(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.ModTime().UnixNano()
}

// geminiFile picks the conversation file among gemini's files for an id:
// the one naming the session whose decoded history is longest (a resume
// leaves a stray header-only file with the same id prefix).
func geminiFile(pattern, id string) string {
	m, _ := filepath.Glob(pattern)
	best, bestN := "", -1
	for _, p := range m {
		data, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(data, []byte(id)) {
			continue
		}
		dec, err := gemini.Decode(data)
		if err != nil {
			continue
		}
		if len(dec.Messages) > bestN {
			best, bestN = p, len(dec.Messages)
		}
	}
	return best
}

// headerField reads a string field of a JSONL file's first line.
func headerField(path, field string) string {
	if path == "" {
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	line, _ := bufio.NewReaderSize(f, 1<<20).ReadBytes('\n')
	var h map[string]any
	if json.Unmarshal(line, &h) != nil {
		return ""
	}
	s, _ := h[field].(string)
	return s
}

// idFromRollout takes the thread id from a rollout file name.
func idFromRollout(path string) string {
	base := strings.TrimSuffix(filepath.Base(path), ".jsonl")
	if len(base) < 36 {
		return ""
	}
	id := base[len(base)-36:]
	if _, err := uuid.Parse(id); err != nil {
		return ""
	}
	return id
}

// piByHeader finds the pi session file whose header names id.
func piByHeader(pattern, id string) string {
	m, _ := filepath.Glob(pattern)
	for _, p := range m {
		if headerField(p, "id") == id {
			return p
		}
	}
	return ""
}

// stdin is what the CLI reads on stdin: the prompt, for agents that take
// it there (Commands.PromptStdin), else nothing.
func (d *driver) stdin() (string, bool) {
	if !d.a.Commands.PromptStdin {
		return "", false
	}
	if d.large != "" {
		return d.large, true
	}
	return cliPrompt(d.a, d.t.Prompt), true
}

// cliPrompt is the prompt as the CLI gets it. Gemini treats a prompt
// starting with "/" or "?" as a command, from stdin too, and drops such
// user text on resume: it gets gemini's escape (its Reader takes it off
// again). In argv (agents that cannot read stdin) a leading "-" would be
// parsed as a flag, so it gets a leading space.
func cliPrompt(a agents.Agent, prompt string) string {
	if a.Name == "gemini" {
		prompt = gemini.Escape(prompt)
	}
	if !a.Commands.PromptStdin && strings.HasPrefix(prompt, "-") {
		prompt = " " + prompt
	}
	return prompt
}

var lineID = regexp.MustCompile(`^line:(\d+)(.*)$`)

// shiftLineIDs turns codex's "line:N" NativeIDs of a parsed suffix into the
// whole file's numbering.
func shiftLineIDs(msgs []transcript.Message, before int) {
	if before == 0 {
		return
	}
	for i := range msgs {
		if m := lineID.FindStringSubmatch(msgs[i].NativeID); m != nil {
			n, _ := strconv.Atoi(m[1])
			msgs[i].NativeID = "line:" + strconv.Itoa(n+before) + m[2]
		}
	}
}
