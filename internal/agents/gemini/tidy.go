package gemini

import (
	"errors"
	"io"
	"os"
	"strings"

	"github.com/cast-dev/cast/internal/fsutil"
)

// TidySession removes the header-only files a resume leaves under session
// id's short id beside its transcript (agents.SessionTidier). Gemini's
// start-up cleanup (general.sessionRetention, on by default) deletes a
// session file with no resumable content and, by its short id, every other
// file sharing it whose session is not the one starting: a stray left by
// resuming X in a new minute makes the next start of another session in the
// same folder delete X's whole transcript. Only files that name id (or no
// session) and hold no message are removed; the transcript FindSession
// picks is never touched.
func (d Driver) TidySession(home, id string) error {
	keep := d.FindSession(home, id)
	files, err := sessionFiles(allChats(home), id)
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range files {
		if f == keep || !stray(f, id) {
			continue
		}
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// stray reports whether the file at path belongs to session id (or names
// none) and holds nothing Gemini would resume (resumable).
func stray(path, id string) bool {
	var sid string
	// A file that does not read, or holds a resumable record, is no stray.
	if fsutil.ReadAt(path, func(f io.ReaderAt, size int64) error {
		l, err := replay(f, size, true, func(string) {})
		if err != nil {
			return err
		}
		errResumable := errors.New("resumable")
		sid = l.sid
		return l.records(f, size, func(r record) error {
			if resumable(r) {
				return errResumable
			}
			return nil
		})
	}) != nil {
		return false
	}
	return sid == "" || sid == id
}

// resumable is the CLI's isResumableMessageRecord: a user record with text
// that is not a command ("/", "?") or injected context, or a model record
// with text, tool calls or thoughts.
func resumable(r record) bool {
	var text strings.Builder
	for _, p := range parseContent(r.Content, func(string) {}) {
		if p.Text != nil {
			text.WriteString(*p.Text)
		}
	}
	t := strings.TrimSpace(text.String())
	switch r.Type {
	case "user":
		for _, ignored := range []string{"/", "?", "<session_context>", "<hook_context>"} {
			if strings.HasPrefix(t, ignored) {
				return false
			}
		}
		return t != ""
	case "gemini":
		return t != "" || len(r.ToolCalls) > 0 || len(r.Thoughts) > 0
	}
	return false
}

// ProjectKey is what Gemini's start-up cleanup works on: the chats of one
// project folder under one home (agents.ProjectExclusive).
func (Driver) ProjectKey(home, cwd string) string { return home + "\x00" + cwd }
