package runner

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/cast-dev/cast/internal/agents"
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
	large, err := d.largePrompt()
	if !large || err != nil {
		return err
	}
	d.mu.Lock()
	id, path := d.id, d.path
	d.mu.Unlock()
	got, err := d.ad.(agents.LargePrompter).DeliverLarge(ctx, bin, env, d.t.Cwd, id, path, d.t.Prompt)
	if err != nil {
		return err
	}
	d.asLarge(got.ID, got.Path)
	if d.tail.path == "" {
		d.tail.path = got.Path // a fresh thread: its file is read from the start
	}
	return nil
}

// largePrompt says whether the turn's prompt goes in as history first
// (deliverLarge); a fork turn with such a prompt is unsupported.
func (d *driver) largePrompt() (bool, error) {
	if _, ok := d.ad.(agents.LargePrompter); !ok || promptTooLong(d.a, d.t.Prompt) == "" {
		return false, nil
	}
	if d.fork {
		return false, &Error{Reason: ReasonUnsupported, Detail: fmt.Sprintf("a native %s fork takes at most %d characters", d.a.DisplayName, d.a.Commands.MaxPromptChars)}
	}
	return true, nil
}

// asLarge makes the turn resume thread id (file path), the one holding the
// prompt, with the pointer to it on stdin.
func (d *driver) asLarge(id, path string) {
	d.mu.Lock()
	d.id, d.path, d.fresh = id, path, false
	d.mu.Unlock()
	d.large = d.ad.(agents.LargePrompter).LargeTurn(d.t.Prompt)
}

// largeNote says, for a dry run, how a prompt that goes in as history
// first is delivered.
func (d *driver) largeNote() string {
	return fmt.Sprintf("the prompt (%d characters, over the %d %s takes in one turn) goes in first as a message of the thread's history %s; the turn then resumes that thread with this pointer to it",
		utf8.RuneCountInString(d.t.Prompt), d.a.Commands.MaxPromptChars, d.a.DisplayName, d.ad.(agents.LargePrompter).LargeHow(d.a.Binary))
}
