package runner_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/runner"
	"github.com/cast-dev/cast/internal/transcript"
)

// TestNativeFork: a turn that forks a native session with the CLI's own
// fork reaches the model with the session's history, emits only what the
// fork turn added, reports the new session and leaves the forked file as
// it was; a fork of a session that is not there fails as "session not
// found" before anything runs.
func TestNativeFork(t *testing.T) {
	for _, c := range cases {
		if a, _ := agents.Lookup(c.agent); !a.Commands.RunnerFork {
			continue
		}
		t.Run(c.agent, func(t *testing.T) {
			t.Parallel()
			fake := fakemodel.Start(t)
			r, turn := setup(t, c, fake.URL)
			turn.Prompt = "first turn FORK-ONE"
			first, _, _, err := run(t, r, turn)
			if err != nil {
				t.Fatal(err)
			}
			before, err := os.ReadFile(first.NativePath)
			if err != nil {
				t.Fatal(err)
			}
			fork := turn
			fork.ForkOf, fork.Prompt = first.NativeID, "forked turn FORK-TWO"
			res, got, _, err := run(t, r, fork)
			if err != nil {
				t.Fatalf("fork turn: %v", err)
			}
			if b, _ := os.ReadFile(res.NativePath); testing.Verbose() {
				t.Logf("fork file:\n%s", b)
			}
			// OpenCode keeps every session in one store: the fork is a new
			// session there, and the store changes.
			shared := c.agent == "opencode"
			if res.NativeID == "" || res.NativeID == first.NativeID || (res.NativePath == first.NativePath) != shared || !res.PromptSeen {
				t.Fatalf("fork result %+v after %+v", res, first)
			}
			if after, _ := os.ReadFile(first.NativePath); !shared && !bytes.Equal(before, after) {
				t.Fatal("the fork changed the forked session's file")
			}
			if txt := lastTurnText(t, fake); !strings.Contains(txt, "FORK-ONE") || !strings.Contains(txt, "FORK-TWO") {
				t.Fatalf("the fork's request lacks the history:\n%s", txt)
			}
			for _, e := range got {
				if e.msg.Kind == transcript.KindUser || strings.Contains(e.msg.Text, "FORK-ONE") {
					t.Fatalf("the fork emitted copied history: %s %s", e.msg.Kind, describe(e.msg))
				}
			}
			if len(got) == 0 {
				t.Fatal("the fork emitted nothing")
			}

			gone := turn
			gone.ForkOf, gone.Prompt = "0c9b8c2e-5b9a-4c55-8f3e-3f4b1d2a6e79", "fork of nothing"
			res, _, _, err = run(t, r, gone)
			switch {
			case shared:
				// Found missing by the CLI itself: it fails with no session.
				if err == nil || res.NativeID != "" || res.PromptSeen || res.Emitted != 0 {
					t.Fatalf("fork of a missing session: %+v %v", res, err)
				}
			case res.Reason != runner.ReasonNoSession || res.PID != 0 || err == nil:
				t.Fatalf("fork of a missing session: %+v %v", res, err)
			}
		})
	}
}
