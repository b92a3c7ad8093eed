package agenttest

import (
	"context"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/transcript"
)

// Sandbox is one agent's pinned CLI in an isolated home (Env) at a fake
// model, with a working directory in that home: where a real-CLI test
// starts.
type Sandbox struct {
	Agent, Bin string
	Fake       *fakemodel.Server
	Home       string // the scratch HOME
	Native     string // the agent's own folder in it (NativeHome)
	Env        []string
	Cwd        string
}

// NewSandbox is agent's Sandbox at fake (nil: a fake of its own), its
// working directory at cwdElem under the home (none: the home).
func NewSandbox(t *testing.T, agent string, fake *fakemodel.Server, cwdElem ...string) *Sandbox {
	t.Helper()
	bin := Bin(t, agent)
	if fake == nil {
		fake = fakemodel.Start(t)
	}
	home, env := Env(t, agent, fake.URL)
	return &Sandbox{Agent: agent, Bin: bin, Fake: fake, Home: home, Native: NativeHome(home, agent), Env: env, Cwd: Cwd(t, home, cwdElem...)}
}

// Run runs the CLI with args in the working directory (MustRun).
func (s *Sandbox) Run(t *testing.T, ctx context.Context, args ...string) Result {
	t.Helper()
	return MustRun(t, ctx, s.Bin, args, s.Env, s.Cwd)
}

// Deadline is a context that ends after d or with the test.
func Deadline(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// CheckCarriedOver writes msgs, a conversation the real CLI of agent
// from produced, for s's agent (write, given its native folder and cwd),
// has s's CLI continue it with args (given what was written; they end in
// a prompt holding MARKER-NEW), and fails t unless the model got every
// turn of it (WantsFor, calls under toolName) and then MARKER-NEW, in the
// one turn the CLI must send (oneTurn) or else in its last.
func (s *Sandbox) CheckCarriedOver(t *testing.T, ctx context.Context, from string, msgs []transcript.Message,
	write func(native, cwd string) (agents.Written, error), args func(agents.Written) []string, toolName func(string) string, oneTurn bool) {
	t.Helper()
	w, err := write(s.Native, s.Cwd)
	if err != nil {
		t.Fatal(err)
	}
	s.Fake.Reset()
	s.Run(t, ctx, args(w)...)
	turns := s.Fake.Turns()
	if oneTurn && len(turns) != 1 {
		t.Fatalf("%s sent %d turns, want 1", s.Agent, len(turns))
	}
	if len(turns) == 0 {
		t.Fatalf("%s sent no turn", s.Agent)
	}
	wants := append(WantsFor(msgs, toolName), Want{Role: "user", Kind: "text", Text: "MARKER-NEW"})
	if len(wants) < 7 {
		t.Fatalf("the %s session is too small to prove anything: %d items", from, len(wants))
	}
	AssertInOrder(t, turns[len(turns)-1].Items, wants)
}
