package muse

import (
	"github.com/cast-dev/cast/internal/agents"
)

// agent is Muse's registry entry (agents.Define says why a variable).
var agent = agents.Define(agents.Agent{
	// Meta's Muse coding agent; its session records are append-only
	// runtime events (encrypted reasoning included) that cast can read
	// but not author.
	//
	// The command forms come from third-party launchers that measured
	// Muse Code 0.1.0 (its docs are behind a login): `muse exec --json`
	// is the headless lane, the prompt is the last positional argument,
	// a turn continues a session by passing the same --session-id again
	// (there is no --resume on exec), and the effort menu is the CLI's
	// own refusal text. Not run here: the CLI is not installable.
	Name: "muse", DisplayName: "Muse", Binary: "muse",
	Commands: agents.Commands{
		Headless: []string{"exec", "--json", "{prompt}"},
		Resume:   []string{"exec", "--json", "--session-id", "{id}", "{prompt}"},
		Model:    []string{"--model", "{model}"},
		Effort:   []string{"--reasoning-effort", "{effort}"},
	},
	DefaultHome:   ".muse",
	Transcript:    "session record JSONL (runtime.session events)",
	ContextWindow: 128_000,
	Caps: agents.Capabilities{CanReconstitute: false, NativeFork: agents.ForkNone, ModelChange: true,
		EffortLevels: []string{"minimal", "low", "medium", "high", "xhigh", "ultra"}},
})
