package runner

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/quota"
	"github.com/cast-dev/cast/internal/transcript"
)

// driver follows one turn of an agent's CLI: the command line, where the
// native session is, and what stdout carries. What differs between agents
// comes from the registry and the agent's agents.Driver.
type driver struct {
	a     agents.Agent
	ad    agents.Driver
	store agents.StoreDriver // set for agents whose sessions live in a store
	t     Turn
	home  string // the agent's own folder (NativeHome)
	fresh bool
	// named: a fresh turn in a file the driver named (agents.SessionNamer).
	named bool
	// fork: the turn runs in a native fork of forkID (file forkPath); id
	// and path name the new session once the CLI made it.
	fork             bool
	forkID, forkPath string

	mu   sync.Mutex
	id   string // native session id (known up front, or from stdout)
	path string // native transcript

	tail *tailer // file-backed agents
	logf func(string, ...any)

	// from stdout
	streamErrs []string
	streamed   map[string]bool         // NativeIDs emitted from the stream
	sawOutput  bool                    // any message streamed
	limits     map[string]quota.Window // usage windows reported, by name

	// large is the turn's stdin when the prompt itself went in as history
	// (deliverLarge): a short pointer to it.
	large string
}

func newDriver(a agents.Agent, t Turn, logf func(string, ...any)) (*driver, error) {
	ad, ok := a.Driver()
	if !ok {
		return nil, &Error{Reason: ReasonUnsupported, Detail: fmt.Sprintf("%s turns are not supported by the runner", a.DisplayName)}
	}
	d := &driver{a: a, ad: ad, t: t, fresh: t.NativeID == "" && t.NativePath == "", id: t.NativeID, path: t.NativePath, logf: logf}
	d.store, _ = ad.(agents.StoreDriver)
	d.home = a.Dir(buildEnv(a, t))
	if t.ForkOf != "" || t.ForkPath != "" {
		d.fork, d.fresh, d.id, d.path = true, false, "", ""
		if err := d.forkSource(); err != nil {
			return nil, err
		}
	}
	if d.store != nil {
		d.streamed = map[string]bool{}
		if !d.fresh && d.id == "" {
			return nil, &Error{Reason: ReasonNoSession, Detail: a.Name + " resumes by session id: Turn.NativeID is empty"}
		}
		d.path = d.store.StorePath(d.home)
		return d, nil
	}
	switch {
	case d.fresh && a.NeedsIDUpFront(agents.FormFresh), d.fork && a.NeedsIDUpFront(agents.FormFork):
		d.id = uuid.NewString()
	case d.fresh:
		if n, ok := ad.(agents.SessionNamer); ok {
			d.path, d.named = n.NewSessionPath(d.home, t.Cwd), true
		}
	case !d.fork && d.id == "":
		d.id = ad.SessionID(d.path)
	}
	if !d.fresh && !d.fork && d.id == "" && d.path == "" {
		return nil, &Error{Reason: ReasonNoSession, Detail: "no native id or path to resume"}
	}
	// A driver is registered with its codec (agents.Register): this
	// cannot fail for an agent that has a driver.
	r, err := agents.ReaderFor(a.Name)
	if err != nil {
		return nil, &Error{Reason: ReasonUnsupported, Detail: err.Error()}
	}
	d.tail = &tailer{reader: r, prompt: t.Prompt, logf: logf}
	if tp, ok := ad.(agents.TailParser); ok {
		d.tail.parse = tp.ParseTail
	}
	return d, nil
}

// args is the CLI's argument list for this turn (agents.Agent.Args).
func (d *driver) args() ([]string, error) {
	d.mu.Lock()
	vars := map[string]string{"prompt": d.prompt(), "id": d.id, "path": d.path, "model": d.t.Model, "effort": d.t.Effort, "new": d.id}
	d.mu.Unlock()
	form := agents.FormResume // also a fresh turn in a file the driver named
	switch {
	case d.fork:
		form, vars["id"], vars["path"] = agents.FormFork, d.forkID, d.forkPath
	case d.fresh && !d.named:
		form = agents.FormFresh
	}
	if !d.fresh && vars["path"] == "" {
		vars["path"] = vars["id"] // a {path} form takes an id too (pi --session)
	}
	return d.a.Args(form, vars, d.t.ReportUsage)
}

// baseline runs before the process starts.
func (d *driver) baseline() {
	if d.tail == nil {
		return
	}
	if d.named {
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
		if _, err := os.Stat(d.path); err == nil || !d.fresh || d.named {
			return
		}
	}
	d.path = d.find(d.id)
}

// find is the native transcript file of session id under the agent's
// folder ("" when there is none).
func (d *driver) find(id string) string { return d.ad.FindSession(d.home, id) }

// tidy removes what the CLI left beside session id's transcript that its
// own start-up cleanup would take for broken (agents.SessionTidier), which
// would make the next start of another session in the folder delete it.
func (d *driver) tidy(id string) {
	td, ok := d.ad.(agents.SessionTidier)
	if !ok || id == "" {
		return
	}
	if err := td.TidySession(d.home, id); err != nil {
		d.logf("runner: %s: could not tidy session %s's stray files: %v", d.a.Name, id, err)
	}
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
	if d.store != nil {
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
	if d.id == "" {
		d.id = d.ad.SessionID(d.path)
	}
	return d.id, d.path
}

func (d *driver) promptSeen() bool {
	if d.tail == nil {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.sawOutput // the stream never repeats the prompt
	}
	return d.tail.state == promptFound
}

// nativeLost says whether the transcript lost history during the turn.
func (d *driver) nativeLost() bool { return d.tail != nil && d.tail.lost }

// storeHolds reports whether the agent's store holds the turn's prompt as
// its newest user message. A store-backed CLI (OpenCode) records the prompt
// before it streams anything, so after an interrupt that came before any
// output only its store says whether the prompt went in (promptSeen cannot).
// An error means it is not known.
func (d *driver) storeHolds(bin string, env []string) (bool, error) {
	d.mu.Lock()
	id := d.id
	d.mu.Unlock()
	if d.store == nil || id == "" {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	msgs, err := d.store.Export(ctx, bin, env, agents.Target{Home: d.home, Cwd: d.t.Cwd}, id)
	if err != nil {
		d.logf("runner: %s: could not read session %s to look for the interrupted prompt: %v", d.a.Name, id, err)
		return false, err
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Kind == transcript.KindUser {
			return matchesPrompt(msgs[i].Text, d.prompt()), nil
		}
	}
	return false, nil
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

// stdoutLine takes in what one line of stdout says (agents.Event).
func (d *driver) stdoutLine(line []byte, out func(transcript.Message)) {
	if len(line) == 0 || line[0] != '{' {
		return
	}
	sr, ok := d.ad.(agents.StdoutReader)
	if !ok {
		return
	}
	ev := sr.Stdout(line)
	d.mu.Lock()
	if ev.SessionID != "" && d.id == "" {
		d.id = ev.SessionID
	}
	if ev.Limit != nil {
		if d.limits == nil {
			d.limits = map[string]quota.Window{}
		}
		d.limits[ev.Limit.Name] = *ev.Limit
	}
	d.mu.Unlock()
	d.addStreamErr(ev.Err)
	for _, m := range ev.Messages {
		if d.streamed[m.NativeID] {
			continue
		}
		if d.streamed == nil {
			d.streamed = map[string]bool{}
		}
		d.streamed[m.NativeID] = true
		d.mu.Lock()
		d.sawOutput = true
		d.mu.Unlock()
		out(m)
	}
}

func (d *driver) addStreamErr(s string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s != "" && len(d.streamErrs) < 20 {
		d.streamErrs = append(d.streamErrs, s)
	}
}

// stoppedExit says whether the CLI's exit is the one it makes when a stop
// signal from outside ends its turn (agents.StopExiter); CLIs that die of
// the signal or exit 128+n are told apart by their wait status.
func (d *driver) stoppedExit(exit int, stdout, stderr string) bool {
	se, ok := d.ad.(agents.StopExiter)
	return ok && se.StoppedExit(exit, stdout, stderr)
}

// usage is the provider's usage windows as the turn saw them: from the
// transcript where the agent records them, else as stdout reported them.
func (d *driver) usage(nativePath string) []quota.Window {
	if tu, ok := d.ad.(agents.TranscriptUsage); ok {
		return tu.Usage(nativePath)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]quota.Window, 0, len(d.limits))
	for _, w := range d.limits {
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if len(out) == 0 {
		return nil
	}
	return out
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
	return d.prompt(), true
}

// prompt is the prompt as the CLI gets it: with the agent's own escapes
// (agents.PromptEscaper) and, in argv (agents that cannot read stdin), a
// leading space before a leading "-", which would be parsed as a flag.
func (d *driver) prompt() string {
	p := d.t.Prompt
	if e, ok := d.ad.(agents.PromptEscaper); ok {
		p = e.Prompt(p)
	}
	if !d.a.Commands.PromptStdin && strings.HasPrefix(p, "-") {
		p = " " + p
	}
	return p
}
