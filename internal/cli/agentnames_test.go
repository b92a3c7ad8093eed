package cli

import (
	"slices"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents"
	// The binary links the catalog; the help is built from whatever it links.
	_ "github.com/cast-dev/cast/internal/agents/codecs"
)

// The --agent help of each command names exactly the agents it takes, as
// the registry has them, so a new agent (or one that loses its codec or
// its fleet store) changes the help with it.
func TestAgentFlagHelpNamesTheRegisteredAgents(t *testing.T) {
	root := (&app{}).root()
	for _, c := range []struct {
		path []string
		want []string
	}{
		{[]string{"new"}, agents.Names()},
		{[]string{"import"}, agents.ReadableAgents()},
		{[]string{"export"}, agents.WritableAgents()},
		{[]string{"account", "add"}, agents.FleetAgents()},
	} {
		t.Run(strings.Join(c.path, " "), func(t *testing.T) {
			if len(c.want) == 0 {
				t.Fatal("the registry lists no agent here: the catalog is not linked")
			}
			cmd, _, err := root.Find(c.path)
			if err != nil {
				t.Fatal(err)
			}
			usage := cmd.Flags().Lookup("agent").Usage
			i := strings.LastIndex(usage, ": ")
			if i < 0 {
				t.Fatalf("--agent help %q lists no agents", usage)
			}
			got := strings.Split(usage[i+2:], ", ")
			slices.Sort(got)
			if !slices.Equal(got, c.want) {
				t.Errorf("--agent help %q names %q; the registry has %q", usage, got, c.want)
			}
		})
	}
}

// The folder lists in export's and restore's long help come from the
// registry too: every agent cast writes sessions for is named with its
// own folder (grok was missing from restore's hand-typed list).
func TestFolderHelpNamesEveryWritableAgent(t *testing.T) {
	root := (&app{}).root()
	for _, path := range [][]string{{"export"}, {"restore"}} {
		cmd, _, err := root.Find(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range agents.WritableAgents() {
			a, _ := agents.Lookup(n)
			if want := a.HomeHint() + " for " + n; !strings.Contains(cmd.Long, want) {
				t.Errorf("cast %s help does not say %q", path[0], want)
			}
		}
	}
}
