package agenttest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/fakemodel"
)

// ResumeWay is one way a real CLI continues a session cast's writer
// wrote: the arguments that name it (its path, its id, "continue the
// latest", ...).
type ResumeWay struct {
	Name string
	Args func(w agents.Written) []string
}

// Resumed is what one ResumeWritten run left for its checks.
type Resumed struct {
	Written agents.Written
	Stdout  string
	Turns   []fakemodel.Request // what reached the fake model
	Items   []fakemodel.Item    // the last turn's items
}

// ResumeWritten is the shared shape of the agents' "real CLI resumes a
// written session" tests: for each way (a subtest), a fresh isolated
// home for agent at a fake model, write puts a conversation there (its
// native home, a cwd at cwdElem under the home, the way's name), the
// real CLI (bin) runs with the way's arguments and then tail (the prompt
// and its flags), and check gets what the run left. It fails before check
// when the answer is not on stdout or no turn reached the model.
func ResumeWritten(t *testing.T, agent, bin string, cwdElem []string, ways []ResumeWay,
	write func(nativeHome, cwd, way string) (agents.Written, error), tail []string, check func(t *testing.T, r Resumed)) {
	for _, way := range ways {
		t.Run(way.Name, func(t *testing.T) {
			fake := fakemodel.Start(t)
			home, env := Env(t, agent, fake.URL)
			cwd := Cwd(t, home, cwdElem...)
			w, err := write(NativeHome(home, agent), cwd, way.Name)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			res := MustRun(t, ctx, bin, append(way.Args(w), tail...), env, cwd)
			if !strings.Contains(res.Stdout, "FAKE-ANSWER") {
				t.Fatalf("no fake answer on stdout:\n%s\nstderr:\n%s", res.Stdout, res.Stderr)
			}
			turns := fake.Turns()
			if len(turns) == 0 {
				t.Fatal("the CLI sent no conversation turn")
			}
			check(t, Resumed{Written: w, Stdout: res.Stdout, Turns: turns, Items: turns[len(turns)-1].Items})
		})
	}
}
