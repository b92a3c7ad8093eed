package client

import (
	"testing"
)

// The node a context names goes with that context's control plane only,
// and `cast node join` records it in the context for the address it
// joined (or in a new one when there is none), never in another's.
func TestRecordNode(t *testing.T) {
	for _, tc := range []struct {
		name    string
		before  map[string]Context // current: "work" when present
		flag    string
		written string // the context RecordNode names
	}{
		{name: "no contexts: a new current one", written: DefaultContext},
		{name: "the current context for the address", before: map[string]Context{"work": {Addr: "cp:7777", Token: "t"}}, written: "work"},
		{name: "the current context is another control plane's", before: map[string]Context{"work": {Addr: "other:7777"}}},
		{name: "--context names the one for the address", before: map[string]Context{"work": {Addr: "other:7777"}, "lab": {Addr: "cp:7777"}},
			flag: "lab", written: "lab"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"XDG_CONFIG_HOME": t.TempDir()}
			getenv := func(k string) string { return env[k] }
			path := ConfigPath(getenv)
			for _, name := range []string{"lab", "work"} { // work last: current
				if c, ok := tc.before[name]; ok {
					must(t, SetContext(path, name, c))
				}
			}
			got, err := RecordNode(getenv, tc.flag, "cp:7777", "sha256:pin", "laptop")
			if err != nil || got != tc.written {
				t.Fatalf("RecordNode = %q, %v; want %q", got, err, tc.written)
			}
			cfg, err := LoadConfig(path)
			must(t, err)
			for name, c := range cfg.Contexts {
				if want := map[bool]string{true: "laptop"}[name == tc.written]; c.Node != want {
					t.Errorf("context %s has node %q, want %q", name, c.Node, want)
				}
			}
			if tc.written == "" {
				return
			}
			// What `cast new` then sends: the node, only to that address.
			env["CAST_CONTEXT"] = tc.written
			if c, err := Resolve(getenv, "", ""); err != nil || c.Node != "laptop" || c.Addr != "cp:7777" {
				t.Errorf("Resolve = %+v, %v; want node laptop at cp:7777", c, err)
			}
			if c, err := Resolve(getenv, "", "elsewhere:7777"); err != nil || c.Node != "" {
				t.Errorf("Resolve with another --addr = %+v, %v; want no node", c, err)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
