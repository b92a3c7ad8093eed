package runner

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/cast-dev/cast/internal/agents/codex"
)

// deliverLarge gets a Codex prompt longer than one Codex turn takes
// (Commands.MaxPromptChars) to the model whole: codex.DeliverLarge adds it
// to the thread's history through the app-server (thread/inject_items has
// no cap), starting the thread when the turn is a fresh one, and the turn
// then resumes that thread with a short pointer to it on stdin. The tailer
// still looks for the prompt itself: the injected message is the turn's
// first new user message, and Codex's Reader drops the pointer. A fork
// turn with such a prompt is unsupported (injecting into the source would
// change the session it forks): the node then runs it on a rebuilt
// history, as any fork the CLI cannot run, and that turn comes here.
func (d *driver) deliverLarge(ctx context.Context, bin string, env []string) error {
	if d.a.Name != "codex" {
		return nil
	}
	why := promptTooLong(d.a, d.t.Prompt)
	switch {
	case why == "":
		return nil
	case d.fork:
		return &Error{Reason: ReasonUnsupported, Detail: fmt.Sprintf("a native %s fork takes at most %d characters", d.a.DisplayName, d.a.Commands.MaxPromptChars)}
	}
	d.mu.Lock()
	id, path := d.id, d.path
	d.mu.Unlock()
	got, err := codex.DeliverLarge(ctx, bin, env, d.t.Cwd, id, path, d.t.Prompt)
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.id, d.path, d.fresh = got.ThreadID, got.Path, false
	d.mu.Unlock()
	if d.tail.path == "" {
		d.tail.path = got.Path // a fresh thread: its file is read from the start
	}
	d.large = codex.LargePromptTurn(utf8.RuneCountInString(d.t.Prompt))
	return nil
}
