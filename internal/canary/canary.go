// Package canary checks that an installed agent CLI still does what cast
// relies on, before a user finds out it does not: in a throwaway HOME and
// against a fake model on loopback (internal/fakemodel), cast's own writer
// writes a short conversation (write), the CLI resumes it with a new prompt
// through the runner, exactly as a node's turn runs (resume: the model must
// receive the written history), the runner syncs the new turn back (append),
// the native session is read back whole (read), and, where the runner
// drives the CLI's own fork (Commands.RunnerFork), a fork must carry the
// history too (fork). Each step's verdict is
// kept per agent, CLI version and capability on the control plane; a move
// into an agent whose installed version failed becomes a handoff.
package canary

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/sandbox"
	"github.com/cast-dev/cast/internal/capability"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/runner"
	"github.com/cast-dev/cast/internal/transcript"
	"github.com/cast-dev/cast/internal/validate"
)

// Checker runs canaries. The zero value is usable.
type Checker struct {
	// Dir is where the throwaway HOMEs go (default: the system temp dir);
	// each run's is removed when it ends.
	Dir string
	// TurnTimeout bounds each CLI run (default 2 minutes).
	TurnTimeout time.Duration
	// Logf, when set, receives the runner's diagnostics.
	Logf func(format string, args ...any)
}

// DefaultTurnTimeout bounds one CLI run of a canary.
const DefaultTurnTimeout = 2 * time.Minute

// Run checks agent's CLI at bin. An error means the canary itself could
// not run (no scratch dir, no loopback port); what the CLI got wrong is in
// the Result.
func (c *Checker) Run(ctx context.Context, agent, bin string) (capability.Result, error) {
	res := capability.Result{Agent: agent, Bin: bin, Version: agents.InstalledVersion(bin)}
	if !capability.Checkable(agent) {
		return res, fmt.Errorf("canary: %s has no conformance check (cast cannot hand it a history)", agent)
	}
	root, err := os.MkdirTemp(c.Dir, "cast-canary-"+agent+"-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(root)
	fake, err := fakemodel.New()
	if err != nil {
		return res, err
	}
	defer fake.Close()
	home, cwd := filepath.Join(root, "home"), filepath.Join(root, "work")
	for _, d := range []string{home, cwd} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return res, err
		}
	}
	sb, err := sandbox.Setup(agent, home, fake.URL)
	if err != nil {
		return res, err
	}
	r := &run{c: c, agent: agent, fake: fake, marks: newMarks(),
		rn:   &runner.Runner{Bins: map[string]string{agent: bin}, Logf: c.Logf},
		turn: runner.Turn{Agent: agent, Model: sb.Model, Cwd: cwd, Home: home, Env: sb.Env}}
	res.Checks = r.steps(ctx, bin)
	return res, nil
}

// marks are the texts a run plants and looks for: random, so nothing a
// CLI injects can pass for them.
type marks struct{ user, answer, resume, fork string }

func newMarks() marks {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	id := hex.EncodeToString(b)
	return marks{user: "canary-history-" + id, answer: "canary-answer-" + id,
		resume: "canary-resume-" + id, fork: "canary-fork-" + id}
}

// history is what cast writes for the CLI to resume.
func (m marks) history() []transcript.Message {
	t := time.Now().UTC().Add(-time.Minute)
	return []transcript.Message{
		{Seq: 1, Kind: transcript.KindUser, Text: "Remember the word " + m.user + ".", Time: t},
		{Seq: 2, Kind: transcript.KindAssistant, Text: "I will remember it: " + m.answer + ".", Time: t.Add(time.Second)},
	}
}

type run struct {
	c     *Checker
	agent string
	fake  *fakemodel.Server
	rn    *runner.Runner
	turn  runner.Turn
	marks marks
}

func (r *run) timeout() time.Duration {
	if r.c.TurnTimeout > 0 {
		return r.c.TurnTimeout
	}
	return DefaultTurnTimeout
}

func pass(cp string) capability.Check { return capability.Check{Capability: cp, Passed: true} }

// failf is a failed check; its detail quotes the CLI and is recorded
// through the API (RecordAgentChecks), so it is clipped as a reason.
func failf(cp, format string, args ...any) capability.Check {
	return capability.Check{Capability: cp, Detail: validate.Clip(fmt.Sprintf(format, args...), 500)}
}

// steps runs write, resume, append, read and fork, each on what the one
// before produced.
func (r *run) steps(ctx context.Context, bin string) []capability.Check {
	t := r.turn
	w, err := agents.WriterFor(r.agent, bin, runner.Env(t))
	if err != nil {
		return []capability.Check{failf(capability.Write, "%v", err)}
	}
	written, err := w.Write(agents.Target{Home: t.AgentDir(), Cwd: t.Cwd, SessionID: "canary",
		NativeID: agents.NewNativeID(r.agent), Model: t.Model}, r.marks.history())
	if err != nil {
		return []capability.Check{failf(capability.Write, "cast's writer: %v", err)}
	}
	out := []capability.Check{pass(capability.Write)}

	t.NativeID, t.NativePath, t.Prompt = written.NativeID, written.Path, "Say the word, then "+r.marks.resume+"."
	res, emitted, err := r.runTurn(ctx, t)
	if err != nil {
		return append(out, failf(capability.Resume, "the CLI failed to resume the session cast wrote: %v", err))
	}
	out = append(out, r.sawHistory(capability.Resume, r.marks.resume, r.marks.user, r.marks.answer))
	out = append(out, answered(emitted))

	t.NativeID, t.NativePath = res.NativeID, res.NativePath
	out = append(out, r.readBack(ctx, t))

	if a, _ := agents.Lookup(r.agent); !a.Commands.RunnerFork {
		return out
	}
	ft := r.turn
	ft.ForkOf, ft.ForkPath, ft.Prompt = res.NativeID, res.NativePath, "And now "+r.marks.fork+"."
	if _, _, err := r.runTurn(ctx, ft); err != nil {
		return append(out, failf(capability.Fork, "the CLI's fork failed: %v", err))
	}
	return append(out, r.sawHistory(capability.Fork, r.marks.fork, r.marks.user, r.marks.resume))
}

func (r *run) runTurn(ctx context.Context, t runner.Turn) (runner.Result, []transcript.Message, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout())
	defer cancel()
	var emitted []transcript.Message
	res, err := r.rn.Run(ctx, t, func(m transcript.Message) { emitted = append(emitted, m) })
	var re *runner.Error
	if errors.As(err, &re) && res.Stderr != "" {
		err = fmt.Errorf("%w (stderr: %s)", err, lastLine(res.Stderr))
	}
	return res, emitted, err
}

// sawHistory checks the model's request for the turn whose prompt holds
// prompt: every one of want must be in it (the history the CLI was to
// carry).
func (r *run) sawHistory(cp, prompt string, want ...string) capability.Check {
	turns := r.fake.Turns()
	for i := len(turns) - 1; i >= 0; i-- {
		texts := itemTexts(turns[i].Items)
		if !strings.Contains(texts, prompt) {
			continue
		}
		var lost []string
		for _, w := range want {
			if !strings.Contains(texts, w) {
				lost = append(lost, w)
			}
		}
		if len(lost) == 0 {
			return pass(cp)
		}
		return failf(cp, "the model got the new prompt without the history (missing %s; it got %d items)", strings.Join(lost, ", "), len(turns[i].Items))
	}
	return failf(cp, "the prompt never reached the model (%d model calls)", len(turns))
}

func itemTexts(items []fakemodel.Item) string {
	var b strings.Builder
	for _, it := range items {
		b.WriteString(it.Text)
		b.WriteString(it.ToolInput)
		b.WriteByte('\n')
	}
	return b.String()
}

// answered checks the runner synced the turn's answer while it ran.
func answered(emitted []transcript.Message) capability.Check {
	for _, m := range emitted {
		if m.Kind == transcript.KindAssistant && strings.Contains(m.Text, "FAKE-ANSWER") {
			return pass(capability.Append)
		}
	}
	return failf(capability.Append, "the turn's answer was not synced back (%d messages synced)", len(emitted))
}

// readBack reads the native session whole: the history cast wrote, the
// prompt and the answer, in that order.
func (r *run) readBack(ctx context.Context, t runner.Turn) capability.Check {
	ctx, cancel := context.WithTimeout(ctx, r.timeout())
	defer cancel()
	msgs, err := r.rn.Native(ctx, t)
	if err != nil {
		return failf(capability.Read, "reading the session back: %v", err)
	}
	want := []struct {
		kind transcript.Kind
		text string
	}{
		{transcript.KindUser, r.marks.user},
		{transcript.KindAssistant, r.marks.answer},
		{transcript.KindUser, r.marks.resume},
		{transcript.KindAssistant, "FAKE-ANSWER"},
	}
	i := 0
	for _, m := range msgs {
		if i < len(want) && m.Kind == want[i].kind && strings.Contains(m.Text, want[i].text) {
			i++
		}
	}
	if i < len(want) {
		return failf(capability.Read, "the session read back lacks the %s %q in order (%d messages read)", want[i].kind, want[i].text, len(msgs))
	}
	return pass(capability.Read)
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return validate.Clip(lines[len(lines)-1], 300)
}
