package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/exportlog"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

type exported struct {
	NativeID string `json:"native_id"`
	Path     string `json:"path"`
	Rewrote  bool   `json:"rewrote"`
}

// runExport runs `cast export --json` through exportCmd.
func runExport(t *testing.T, addr string, args ...string) exported {
	t.Helper()
	out, errOut, err := runSubcommand(addr, true, (*app).exportCmd, args...)
	return parseExport(t, out, errOut, err, args)
}

// parseExport is what `cast export --json` args printed.
func parseExport(t *testing.T, out, errOut string, err error, args []string) exported {
	t.Helper()
	if err != nil {
		t.Fatalf("cast export %v: %v\n%s", args, err, errOut)
	}
	var e exported
	if err := json.Unmarshal([]byte(out), &e); err != nil || e.NativeID == "" || e.Path == "" {
		t.Fatalf("cast export %v printed %q: %v", args, out, err)
	}
	return e
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// exportRig is a control plane holding a session of two messages, with an
// empty export log, and the arguments that export it into a new Claude
// folder.
func exportRig(t *testing.T) (string, []string) {
	t.Helper()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	c, addr := diffRig(t)
	cwd, home := t.TempDir(), t.TempDir()
	sess := historySession(t, c, cwd, []*castv1.Message{
		{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "find the flaky test"},
		{Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Agent: "claude", Text: "it is in store"},
	})
	return addr, []string{sess.Id, "--agent", "claude", "--home", home}
}

// A second `cast export` into the same agent folder rewrites the native
// session only while it is byte-identical to what cast wrote; one the user
// added to since gets a new native session beside it and is left as it
// is, unless the user passes --overwrite. Real files, the real writer.
func TestExportNeverRewritesAChangedNativeSession(t *testing.T) {
	addr, args := exportRig(t)

	first := runExport(t, addr, args...)
	if first.Rewrote {
		t.Fatalf("the first export says it rewrote a session: %+v", first)
	}
	again := runExport(t, addr, args...)
	if again.NativeID != first.NativeID || again.Path != first.Path || !again.Rewrote {
		t.Fatalf("an export over an unchanged file wrote %+v, want a rewrite of %+v", again, first)
	}

	// The user resumes the exported session and adds to it.
	f, err := os.OpenFile(first.Path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"type":"user","note":"the user's own turn"}` + "\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	users := readFile(t, first.Path)

	third := runExport(t, addr, args...)
	if third.NativeID == first.NativeID || third.Path == first.Path || third.Rewrote {
		t.Fatalf("an export over a changed file wrote %+v, want a new session beside %+v", third, first)
	}
	if !bytes.Equal(readFile(t, first.Path), users) {
		t.Fatal("the export rewrote the native session the user had added to")
	}
	if len(readFile(t, third.Path)) == 0 {
		t.Fatalf("the new native session %s is empty", third.Path)
	}

	// --overwrite rewrites the last export even though it changed.
	if err := os.WriteFile(third.Path, append(readFile(t, third.Path), "{}\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	forced := runExport(t, addr, append(args, "--overwrite")...)
	if forced.NativeID != third.NativeID || forced.Path != third.Path || !forced.Rewrote {
		t.Fatalf("--overwrite wrote %+v, want a rewrite of %+v", forced, third)
	}
	if bytes.HasSuffix(readFile(t, third.Path), []byte("{}\n")) {
		t.Fatal("--overwrite left the changed file as it was")
	}
	if !bytes.Equal(readFile(t, first.Path), users) {
		t.Fatal("--overwrite touched an older native session")
	}
}

// An export decides to rewrite the native session it wrote last time only
// while it holds the export log's lock, as the write itself does: another
// cast writing there holds it (a long export, a restore), and the user
// may resume the file and add to it meanwhile. The check ran before the
// lock was taken, and the export, let in afterwards, wrote over what the
// user had added.
func TestExportChecksTheFileUnderTheLogLock(t *testing.T) {
	addr, args := exportRig(t)
	first := runExport(t, addr, args...)

	logPath := filepath.Join(filepath.Dir(client.ConfigPath(os.Getenv)), exportlog.FileName)
	held, err := exportlog.Lock(logPath) // another cast, writing
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		out, errOut string
		err         error
	}
	done := make(chan result, 1)
	go func() {
		out, errOut, err := runSubcommand(addr, true, (*app).exportCmd, args...)
		done <- result{out, errOut, err}
	}()
	waitLockWaiter(t, logPath+".lock")
	// The user resumes the exported session and adds to it.
	users := append(readFile(t, first.Path), `{"type":"user","note":"the user's own turn"}`+"\n"...)
	if err := os.WriteFile(first.Path, users, 0o600); err != nil {
		t.Fatal(err)
	}
	held.Unlock()

	r := <-done
	second := parseExport(t, r.out, r.errOut, r.err, args)
	if !bytes.Equal(readFile(t, first.Path), users) {
		t.Fatalf("the export (%+v) wrote over the native session the user added to while it waited", second)
	}
	if second.Path == first.Path || second.Rewrote {
		t.Fatalf("an export over a changed file wrote %+v, want a new session beside %+v", second, first)
	}
}

// waitLockWaiter waits until a process (this one's export) is blocked on
// the flock of the file at path (a "->" line of /proc/locks for its inode).
func waitLockWaiter(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	ino := fmt.Sprintf(":%d ", fi.Sys().(*syscall.Stat_t).Ino)
	testharness.WaitFor(t, 30*time.Second, "an export waiting on the export log's lock", func() bool {
		b, err := os.ReadFile("/proc/locks")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "->") && strings.Contains(l, "FLOCK") && strings.Contains(l, ino) {
				return true
			}
		}
		return false
	})
}
