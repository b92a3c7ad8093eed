// Package cursor is Cursor's agent (cursor-agent): its registry entry and
// login rules only. Its transcripts are SQLite blobs cast cannot write, and
// its CLI is not installable here, so it has no driver or codec.
package cursor

import (
	"github.com/cast-dev/cast/internal/agents"
)

// agent is Cursor's registry entry (agents.Define says why a variable).
var agent = agents.Define(agents.Agent{
	Name: "cursor", DisplayName: "Cursor", Binary: "cursor-agent",
	Commands: agents.Commands{
		Headless: []string{"-p", "{prompt}", "--output-format", "stream-json"},
		Resume:   []string{"--resume", "{id}", "-p", "{prompt}", "--output-format", "stream-json"},
		Model:    []string{"--model", "{model}"},
	},
	DefaultHome: ".cursor",
	// SQLite blobs cast cannot write, hence no reconstitution.
	Transcript:    "chats/<hash(cwd)>/<session-id>/store.db",
	ContextWindow: 200_000,
	Caps:          agents.Capabilities{CanReconstitute: false, NativeFork: agents.ForkNone, ModelChange: true},
	Login: agents.Login{
		Env: []string{"CURSOR_API_KEY"}, Command: "run `cursor-agent login`", Key: "CURSOR_API_KEY",
	},
})
