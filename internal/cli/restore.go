package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/spf13/cobra"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/exportlog"
	"github.com/cast-dev/cast/internal/fsutil"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/transcript"
)

func (a *app) restoreCmd() *cobra.Command {
	var f restoreFlags
	cmd := onSession(&cobra.Command{
		Use:   "restore ID [--home DIR] [--cwd C]",
		Short: "Write a session back where its agent lists it (after its native file is gone), on this machine",
		Long: "Writes the session as its agent's native session in the agent's own folder as this user has it\n" +
			"(" + agents.HomeHints(agents.WritableAgents()) + "), so the agent's\n" +
			"own picker and resume find it. An adopted session gets its native id back (Codex's a new one: its\n" +
			"index would not find the old; one switched to another agent since, a new one of that agent), so the\n" +
			"resume command the user knew still works. Refused while that native session is still there, or the copy\n" +
			"an earlier restore or export of it wrote into that folder.",
	}, sessionUse{hint: "cast restore ID; `cast ls --origin native` lists adopted sessions"}, func(cmd *cobra.Command, id string, _ []string) error {
		sess, msgs, err := a.exportAll(cmd.Context(), id)
		if err != nil {
			return err
		}
		defer msgs.Close()
		ag, ok := agents.Lookup(sess.Agent)
		if !ok {
			return fmt.Errorf("session %s runs unknown agent %q", sess.Id, sess.Agent)
		}
		t, err := f.target(sess, ag)
		if err != nil {
			return err
		}
		if t.NativeID, err = restoreID(cmd.Context(), sess, ag, t.Home); err != nil {
			return err
		}
		log, err := loadExportLog()
		if err != nil {
			return err
		}
		key := exportlog.Key(sess.Agent, t.Home, sess.Id)
		if err := notWrittenBefore(log, key, sess, t.NativeID); err != nil {
			return err
		}
		out, err := writeNative(sess.Agent, t, msgs, log, key, nil)
		if err != nil {
			return err
		}
		a.tidyRestored(sess.Agent, t.Home, out.NativeID)
		return a.printWritten(sess.Id, sess.Agent, msgs.Len(), out, nil, "restored", "")
	})

	cmd.Flags().StringVar(&f.home, "home", "", "the agent's own folder (default: where the agent keeps it for this user)")
	cmd.Flags().StringVar(&f.cwd, "cwd", "", "working directory the agent will run in (default: the session's)")
	return cmd
}

// restoreFlags are restore's flags.
type restoreFlags struct {
	home, cwd string
}

// target is where sess is written back (its native id still to pick): the
// agent's own folder for this user and the session's working directory
// unless the flags give them, refused without an absolute directory.
func (f *restoreFlags) target(sess *castv1.Session, ag agents.Agent) (agents.Target, error) {
	return writeTarget(sess, cmp.Or(f.home, ag.Dir(os.Environ())), f.cwd, sess.Model)
}

// tidyRestored removes strays of the old native file (Gemini's header-only
// resumes), which would make the agent's own cleanup take the restored
// one. The session is restored either way: a failure is a warning.
func (a *app) tidyRestored(agent, home, nativeID string) {
	td, ok := agents.DriverAs[agents.SessionTidier](agent)
	if !ok {
		return
	}
	if err := td.TidySession(home, nativeID); err != nil {
		fmt.Fprintf(a.errOut, "cast: warning: restored, but the agent's stray files for it stay: %v\n", err)
	}
}

// notWrittenBefore refuses a restore under a new native id while the
// file cast last wrote sess into under home (an earlier restore or
// export: key's record) still holds its conversation. Codex's restores get
// a new id each time, so the check for the origin's id never saw them:
// each restore left another copy, and the user's turns on one were missing
// from the others.
func notWrittenBefore(log *exportlog.Log, key string, sess *castv1.Session, nativeID string) error {
	rec, ok := log.Records[key]
	if !ok || rec.NativeID == nativeID || fsutil.Gone(rec.Path) || !holdsMessages(sess.Agent, rec.Path) {
		return nil
	}
	return fmt.Errorf("%s session %s was written here before as %s (%s) and is still there; resume that one, or remove it and restore again",
		sess.Agent, sess.Id, rec.NativeID, rec.Path)
}

// restoreID is the native id a restore writes sess under: its origin's,
// refused while that native session is still under home, or a new one
// (no origin of this agent, or an agent whose index would not resume an
// old id).
func restoreID(ctx context.Context, sess *castv1.Session, ag agents.Agent, home string) (string, error) {
	// The origin's native id is its agent's: a session switched to
	// another agent since is that agent's new session (an id of
	// another agent's format may not resume, and that agent's folder
	// never holds the original to refuse over).
	nativeID := ""
	if o := sess.GetOrigin(); o.GetAgent() == sess.Agent {
		nativeID = o.GetNativeId()
	}
	if d, hasDriver := ag.Driver(); hasDriver && nativeID != "" {
		p, err := stillThere(ctx, ag, d, home, nativeID)
		if err != nil {
			return "", err
		}
		if p != "" {
			return "", fmt.Errorf("%s session %s is still there (%s); nothing to restore (`cast export` writes a copy as a new session)", sess.Agent, nativeID, p)
		}
	}
	if nativeID == "" || ag.Caps.IndexedIDs {
		nativeID = agents.NewNativeID(sess.Agent) // its old id would not resume (IndexedIDs)
	}
	return nativeID, nil
}

// stillThere is where agent's native session id is under home ("" when
// it is not): its file holding a conversation, or its agent's store (an
// agent keeping sessions as rows, agents.StoreLister, asked through its
// CLI on PATH, as its writer does). Unchecked, the store's writer deleted
// the user's session to import cast's copy under its id
// (TestRestoreRefusesAStoredSessionStillThere).
func stillThere(ctx context.Context, ag agents.Agent, d agents.Driver, home, id string) (string, error) {
	if sl, ok := d.(agents.StoreLister); ok {
		bin, err := exec.LookPath(ag.Binary)
		if err != nil {
			return "", fmt.Errorf("restoring a %s session needs its CLI (%s) on PATH: %w", ag.DisplayName, ag.Binary, err)
		}
		list, err := sl.StoredSessions(ctx, bin, os.Environ(), home)
		if err != nil {
			return "", fmt.Errorf("look for %s session %s in its store: %w", ag.Name, id, err)
		}
		for _, s := range list {
			if s.ID == id {
				return sl.StorePath(home), nil
			}
		}
		return "", nil
	}
	if p := d.FindSession(home, id); p != "" && holdsMessages(ag.Name, p) {
		return p, nil
	}
	return "", nil
}

// holdsMessages says whether agent's native file at path holds anything
// of a conversation (a header-only stray a resume left does not). A
// reader that streams (agents.StreamReader) stops at the first message
// instead of holding the file's: it can be hundreds of MB.
func holdsMessages(agent, path string) bool {
	r, err := agents.ReaderFor(agent)
	if err != nil {
		return true // cannot tell: take it as there
	}
	sr, ok := r.(agents.StreamReader)
	if !ok {
		msgs, err := r.Read(path)
		return err != nil || len(msgs) > 0
	}
	// A message ends the read with errHolds; a file that does not open or
	// read is taken as there, as above.
	return fsutil.ReadAt(path, func(f io.ReaderAt, size int64) error {
		return sr.ReadEach(f, size, func(transcript.Message) error { return errHolds })
	}) != nil
}

// errHolds stops holdsMessages' read at the first message.
var errHolds = errors.New("holds a message")
