package agenttest

import (
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents"
)

// LoginCase is one row of a login table test: files laid out in a scratch
// HOME (Layout), the environment the turns get (HOME is added), and what
// FindLogin must answer: ready or not, and a part of what it says, where
// HOME and DIR stand for the scratch HOME and the agent's folder in it
// ("" wants it to say nothing).
type LoginCase struct {
	Name  string
	Files map[string]string
	Env   []string
	Ready bool
	Says  string
}

// CheckLogins runs agent's FindLogin over cases; folder is the agent's own
// folder under a HOME ("" for HOME itself).
func CheckLogins(t *testing.T, agent, folder string, cases []LoginCase) {
	t.Helper()
	a, ok := agents.Lookup(agent)
	if !ok {
		t.Fatalf("agenttest: unknown agent %q", agent)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			home := Layout(t, c.Files)
			dir := home + "/" + folder
			if folder == "" {
				dir = home
			}
			got, ok := a.FindLogin(dir, append([]string{"HOME=" + home}, c.Env...))
			want := strings.NewReplacer("HOME", home, "DIR", dir).Replace(c.Says)
			if ok != c.Ready || !strings.Contains(got, want) || (c.Says == "" && got != "") {
				t.Errorf("FindLogin = %v %q; want %v %q", ok, got, c.Ready, want)
			}
		})
	}
}

// Case makes a LoginCase, so a table reads one row a line.
func Case(name string, files map[string]string, env []string, ready bool, says string) LoginCase {
	return LoginCase{Name: name, Files: files, Env: env, Ready: ready, Says: says}
}
