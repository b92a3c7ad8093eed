package agenttest

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/transcript"
)

// Short constructors for the neutral messages of a writer's table tests.
func User(s string) transcript.Message { return transcript.Message{Kind: transcript.KindUser, Text: s} }
func Asst(s string) transcript.Message {
	return transcript.Message{Kind: transcript.KindAssistant, Text: s}
}
func Think(s string) transcript.Message {
	return transcript.Message{Kind: transcript.KindThinking, Text: s}
}
func Call(id, name, in string) transcript.Message {
	return transcript.Message{Kind: transcript.KindToolCall, ToolCall: &transcript.ToolCall{ID: id, Name: name, Input: in}}
}
func ToolResult(id, out string, isErr bool) transcript.Message {
	return transcript.Message{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: id, Output: out, IsError: isErr}}
}

// Core is what must survive a round trip through a writer and its
// reader; ids, times and agent fields are native bookkeeping. ExitCode is
// the result's exit code plus 1000 (0: none), kept only for a format
// that stores exit codes.
type Core struct {
	Kind       transcript.Kind
	Text       string
	ToolCall   transcript.ToolCall
	ToolResult transcript.ToolResult
	ExitCode   int32
}

// Cores is the Core of each of msgs, leaving out the kinds in drop (what
// a format does not keep) and exit codes unless exitCodes.
func Cores(msgs []transcript.Message, exitCodes bool, drop ...transcript.Kind) []Core {
	var out []Core
	for _, m := range msgs {
		if slices.Contains(drop, m.Kind) {
			continue
		}
		c := Core{Kind: m.Kind, Text: m.Text}
		if m.ToolCall != nil {
			c.ToolCall = *m.ToolCall
		}
		if m.ToolResult != nil {
			c.ToolResult = *m.ToolResult
			c.ToolResult.ExitCode = nil
			if exitCodes && m.ToolResult.ExitCode != nil {
				c.ExitCode = *m.ToolResult.ExitCode + 1000
			}
		}
		out = append(out, c)
	}
	return out
}

// RoundTrip is one row of a writer's round-trip table: what it is given
// and what reads back (nil: the same).
type RoundTrip struct {
	Name     string
	In, Want []transcript.Message
}

// Trip makes a RoundTrip, so a table reads one row a call.
func Trip(name string, in, want []transcript.Message) RoundTrip {
	return RoundTrip{Name: name, In: in, Want: want}
}

// Codec is what a round-trip test needs of one agent's format: a fresh
// target to write to, the writer and a read of what it wrote (its path),
// the cores to compare, and checks of the written file's bytes (Check,
// may be nil) and of what reading it gives (After, may be nil).
type Codec struct {
	Target func(t *testing.T) agents.Target
	Writer agents.Writer
	Read   func(t *testing.T, path string) ([]transcript.Message, error)
	Cores  func([]transcript.Message) []Core
	Check  func(t *testing.T, data []byte)
	After  func(t *testing.T, w agents.Written, want []transcript.Message)
	// Hidden are texts that must never be in a written file (an
	// internal row, a notice the format does not keep).
	Hidden []string
}

// CheckRoundTrips writes each of cases with c, holds the file to c.Check
// and c.Hidden, and reads it back: well formed, with the cores of what
// the case wants.
func CheckRoundTrips(t *testing.T, c Codec, cases []RoundTrip) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.Name, func(t *testing.T) {
			w, err := c.Writer.Write(c.Target(t), tt.In)
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(w.Path)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range c.Hidden {
				if strings.Contains(string(data), s) {
					t.Fatalf("%q, a row the native file must not hold, was written", s)
				}
			}
			if c.Check != nil {
				c.Check(t, data)
			}
			got, err := c.Read(t, w.Path)
			if err != nil {
				t.Fatal(err)
			}
			CheckWellFormed(t, got)
			want := tt.Want
			if want == nil {
				want = tt.In
			}
			if g, w := c.Cores(got), c.Cores(want); !reflect.DeepEqual(g, w) {
				t.Errorf("round trip\n got %+v\nwant %+v", g, w)
			}
			if c.After != nil {
				c.After(t, w, want)
			}
		})
	}
}

// CheckRejectsBadTarget fails t unless w refuses a target without a home
// or with a relative cwd.
func CheckRejectsBadTarget(t *testing.T, w agents.Writer) {
	t.Helper()
	for _, tg := range []agents.Target{{Cwd: "/x"}, {Home: t.TempDir(), Cwd: "relative"}} {
		if _, err := w.Write(tg, nil); err == nil {
			t.Errorf("Write(%+v) did not fail", tg)
		}
	}
}

// PairingTrips are the rows every writer's round-trip table holds for
// the pairing it repairs: a result moved up to its call, and an orphan
// call given an explicit failed result (orphanOutput, the agent's text).
func PairingTrips(orphanOutput string) []RoundTrip {
	return []RoundTrip{
		Trip("result moved up to its call", []transcript.Message{
			User("u"), Call("c1", "ls", `{}`), User("meanwhile"), ToolResult("c1", "late", false),
		}, []transcript.Message{User("u"), Call("c1", "ls", `{}`), ToolResult("c1", "late", false), User("meanwhile")}),
		Trip("orphan call gets an explicit result", []transcript.Message{User("u"), Call("c1", "ls", `{}`), Asst("x")},
			[]transcript.Message{User("u"), Call("c1", "ls", `{}`), ToolResult("c1", orphanOutput, true), Asst("x")}),
	}
}
