package gemini

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
)

// The pinned CLI, resuming a session whose file is named for an earlier
// minute, leaves a header-only file under the session's short id; the
// next start of another session in the same folder runs Gemini's cleanup,
// which deletes that stray and, by the short id, the session's whole
// transcript (seen as a resumed session "dropping its history" and as a
// turn whose native session vanished in the delivery model test). Without
// TidySession the transcript is gone; with it, it survives whole.
func TestRealGeminiAnotherSessionsStartKeepsAResumedSession(t *testing.T) {
	for _, tidy := range []bool{false, true} {
		t.Run(fmt.Sprintf("tidy=%v", tidy), func(t *testing.T) {
			s := agenttest.NewSandbox(t, "gemini", nil, "work", "proj")
			native, cwd := s.Native, s.Cwd
			msgs := foreignConversation()
			msgs[0].Time = time.Now().Add(-2 * time.Hour) // the file is named for that minute
			w, err := Writer{}.Write(agents.Target{Home: native, Cwd: cwd, SessionID: "7a2b3c4d-0000-4000-8000-00000000000" + map[bool]string{false: "1", true: "2"}[tidy]}, msgs)
			if err != nil {
				t.Fatal(err)
			}
			ctx := agenttest.Deadline(t, 4*time.Minute)
			s.Run(t, ctx, "--resume", w.NativeID, "-p", "second turn MARKER-X2")
			files, _ := filepath.Glob(filepath.Join(filepath.Dir(w.Path), "session-*-"+w.NativeID[:8]+".jsonl"))
			if len(files) != 2 {
				t.Fatalf("after the resume, %d files under the short id, want the transcript and the CLI's stray: %v", len(files), files)
			}
			if tidy {
				if err := (Driver{}).TidySession(native, w.NativeID); err != nil {
					t.Fatal(err)
				}
				if left, _ := filepath.Glob(filepath.Join(filepath.Dir(w.Path), "session-*-"+w.NativeID[:8]+".jsonl")); len(left) != 1 || left[0] != w.Path {
					t.Fatalf("after TidySession: %v, want only %s", left, w.Path)
				}
			}
			s.Run(t, ctx, "--session-id", "9e8d7c6b-0000-4000-8000-000000000000", "-p", "another session")
			path := Driver{}.FindSession(native, w.NativeID)
			if !tidy {
				if path != "" {
					t.Fatalf("the pinned CLI kept %s with its stray beside it; the cleanup this works around changed", path)
				}
				return
			}
			got, err := Reader{}.Read(path)
			if err != nil {
				t.Fatalf("the resumed session is gone after another session's start: %v", err)
			}
			agenttest.AssertHoldsAll(t, "the resumed session, after another session's start,", agenttest.Texts(got), "MARKER-U1", "MARKER-A4", "MARKER-X2")
		})
	}
}
