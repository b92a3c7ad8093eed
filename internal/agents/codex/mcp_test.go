package codex

import (
	"reflect"
	"strings"
	"testing"

	toml "github.com/pelletier/go-toml/v2"

	"github.com/cast-dev/cast/internal/agents"
)

// awkward strings a path, an argument or an environment value may hold.
var awkward = []string{
	"plain",
	`a "quoted" word`,
	`C:\path\with\backslashes`,
	"del \x7f and bell \a and nul-free control \x1b[0m",
	"two\nlines\r\nand a\ttab",
	"unicode: ü, 日本, 😀, \u2028",
	`'single' and """triple"""`,
	"",
}

// Each -c override TakeMCP gives is one TOML value that the library's
// decoder reads back as exactly what went in.
func TestTakeMCPRoundTripsAwkwardStrings(t *testing.T) {
	for _, s := range awkward {
		t.Run(s, func(t *testing.T) {
			srv := agents.MCPServer{Name: "cast", Command: "/opt/" + s + "/cast",
				HistoryArgs: []string{"mcp", s, "--session=" + s},
				Env:         map[string]string{"CAST_X": s, "CAST_Y": "y"}}
			var turn agents.MCPTurn
			if _, err := (Driver{}).TakeMCP(srv, &turn); err != nil {
				t.Fatal(err)
			}
			if len(turn.Args) != 6 {
				t.Fatalf("args %q, want three -c overrides", turn.Args)
			}
			doc := ""
			for i := 0; i < len(turn.Args); i += 2 {
				if turn.Args[i] != "-c" || strings.Contains(turn.Args[i+1], "\n") {
					t.Fatalf("override %q is not one -c line", turn.Args[i:i+2])
				}
				doc += turn.Args[i+1] + "\n"
			}
			var got struct {
				MCP map[string]struct {
					Command string            `toml:"command"`
					Args    []string          `toml:"args"`
					Env     map[string]string `toml:"env"`
				} `toml:"mcp_servers"`
			}
			if err := toml.Unmarshal([]byte(doc), &got); err != nil {
				t.Fatalf("%v in\n%s", err, doc)
			}
			c := got.MCP["cast"]
			if c.Command != srv.Command || !reflect.DeepEqual(c.Args, srv.HistoryArgs) || !reflect.DeepEqual(c.Env, srv.Env) {
				t.Fatalf("decoded %+v, want %q %q %q", c, srv.Command, srv.HistoryArgs, srv.Env)
			}
		})
	}
}
