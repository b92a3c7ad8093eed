package pi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/fsutil"
)

// piExtension is a pi extension (TypeScript, loaded by pi's jiti) that
// declares the history tool with the MCP tool's own description and input
// schema and runs `cast mcp call history ARGS` without a shell: pi has no
// MCP client ("No MCP" in its README), so the call goes through the same
// tool in process. The cast binary, name, description and schema are
// JSON literals, so nothing in them can break out of the source.
const piExtension = `// Written by the cast node; rewritten when it changes. pi has no MCP
// client, so this declares cast's read-only history tool and runs it
// through "cast mcp call", the same MCP tool other agents reach on stdio.
import { execFile } from "node:child_process";

const castBin = %s;

export default function (pi: any) {
  pi.registerTool({
    name: %s,
    label: %s,
    description: %s,
    parameters: %s,
    async execute(_toolCallId: string, params: unknown, signal?: AbortSignal) {
      const text = await new Promise<string>((resolve, reject) => {
        execFile(castBin, ["mcp", "call", %s, JSON.stringify(params ?? {})],
          { signal, maxBuffer: 16 << 20 },
          (err, stdout, stderr) => (err ? reject(new Error(String(stderr || err.message).trim())) : resolve(String(stdout))));
      });
      return { content: [{ type: "text", text }], details: {} };
    },
  });
}
`

// TakeMCP gives pi cast's history tool. pi
// (@mariozechner/pi-coding-agent 0.73) has no MCP client by design (its
// README: "No MCP. ... build an extension"), so an extension that calls
// the MCP tool through `cast mcp call` is written into cast's own folder
// (never the checkout or pi's folder, which may be the user's) and loaded
// with -e; CAST_SESSION and CAST_ADDR reach `cast mcp call` through pi's
// environment.
func (Driver) TakeMCP(s agents.MCPServer, t *agents.MCPTurn) (string, error) {
	src := ExtensionSource(s)
	path := filepath.Join(s.Dir, "pi-cast-history.ts")
	if old, err := os.ReadFile(path); err != nil || !bytes.Equal(old, src) {
		if err := fsutil.WritePrivate(path, src); err != nil {
			return "", err
		}
	}
	t.Args = append(t.Args, "-e", path)
	return "", nil
}

// ExtensionSource is the extension declaring s's history tool; the tool
// is named as pi's model sees it (opencode's name for the same MCP tool).
func ExtensionSource(s agents.MCPServer) []byte {
	lit := func(v string) string { b, _ := json.Marshal(v); return string(b) }
	return fmt.Appendf(nil, piExtension, lit(s.Command), lit(s.Name+"_"+s.HistoryTool), lit("cast history"),
		lit(s.HistoryDescription), s.HistorySchema, lit(s.HistoryTool))
}
