package opencode

import (
	"os"
	"path/filepath"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/sandbox"
)

// agent is OpenCode's registry entry (agents.Define says why a variable).
var agent = agents.Define(agents.Agent{
	Name: "opencode", DisplayName: "OpenCode", Binary: "opencode", NPMPackage: "opencode-ai",
	Commands: agents.Commands{
		// `opencode run` with no message argument reads the message from
		// stdin (1.18.33: as given; an argument holding spaces would be
		// wrapped in double quotes). Parts stream as JSON events on
		// stdout, errors go to stderr.
		Headless:    []string{"run", "--format", "json", "--print-logs", "--log-level", "ERROR"},
		Resume:      []string{"run", "--format", "json", "--print-logs", "--log-level", "ERROR", "--session", "{id}"},
		Fork:        []string{"run", "--format", "json", "--print-logs", "--log-level", "ERROR", "--session", "{id}", "--fork"},
		Model:       []string{"--model", "{model}"},
		Effort:      []string{"--variant", "{effort}"},
		PromptStdin: true,
		RunnerFork:  true,
		Env:         []string{"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_SHARE=1"},
		// opencode run exits 0 after giving up on a failing provider.
		FailedOnStderr: "level=ERROR",
	},
	HomeEnv: "XDG_DATA_HOME", DefaultHome: ".local/share",
	// Not a file: rows in SQLite, loaded through `opencode import`.
	Transcript:    "opencode/opencode.db (session, message, part tables)",
	ContextWindow: 128_000,
	MintsNativeID: true,
	// The CLI's --fork copies the whole session; the serve API
	// (POST /session/:id/fork {messageID}) cuts after any message.
	Caps: agents.Capabilities{CanReconstitute: true, NativeFork: agents.ForkAtAnyMessage, ModelChange: true,
		EffortLevels: []string{"minimal", "low", "medium", "high", "max"}},
	Verified: true,
	Login: agents.Login{
		// Its folder is XDG_DATA_HOME; `opencode auth login` writes here.
		Files:   []string{"opencode/auth.json"},
		Env:     []string{"ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY", "OPENCODE_API_KEY"},
		Command: "run `opencode auth login`", Key: "ANTHROPIC_API_KEY",
	},
	Loopback: loopback,
})

// loopback writes an opencode.json whose provider is on loopback.
func loopback(home, baseURL string) (agents.Loopback, error) {
	model := sandbox.FakeProvider + "/" + sandbox.FakeModel
	err := sandbox.WriteJSON(filepath.Join(home, ".config", "opencode", "opencode.json"), map[string]any{
		"$schema":     "https://opencode.ai/config.json",
		"autoupdate":  false,
		"share":       "disabled",
		"model":       model,
		"small_model": model,
		"provider": map[string]any{sandbox.FakeProvider: map[string]any{
			"npm":     "@ai-sdk/openai-compatible", // bundled: nothing is downloaded
			"name":    "Fake loopback",
			"options": map[string]any{"baseURL": baseURL + "/v1", "apiKey": sandbox.FakeAPIKey},
			"models": map[string]any{sandbox.FakeModel: map[string]any{
				"name": "Fake Model", "tool_call": true,
				"limit": map[string]any{"context": 128000, "output": 4096},
				// A model that reads images, as the ones people use do.
				"attachment": true,
				"modalities": map[string]any{"input": []string{"text", "image"}, "output": []string{"text"}},
			}},
		}},
		"permission": map[string]any{"bash": "allow", "edit": "allow", "webfetch": "deny"},
	})
	if err == nil {
		err = declarePlugin(filepath.Join(home, ".config", "opencode"))
	}
	return agents.Loopback{Env: []string{
		"OPENCODE_DISABLE_MODELS_FETCH=1",
		"OPENCODE_DISABLE_AUTOUPDATE=1",
		"OPENCODE_DISABLE_SHARE=1",
		"OPENCODE_DISABLE_LSP_DOWNLOAD=1",
		"OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
		"OPENCODE_DISABLE_CLAUDE_CODE=1",
		// Should the install declarePlugin forestalls run after all (a
		// later OpenCode checking otherwise), it fails at once from the
		// empty npm cache instead of reaching the registry.
		"npm_config_offline=true",
		// OpenCode is a Bun binary: each command is a fresh JavaScriptCore
		// that compiles its bundle's hot code in background JIT threads
		// (about a fifth of a run's CPU) for a process that lives seconds.
		// Without the optimizing tiers (DFG and FTL for JavaScript, OMG for
		// WebAssembly) the same code runs in the baseline tiers, which mean
		// the same: a test's CLI does what it did, for ~15% less CPU.
		"BUN_JSC_useDFGJIT=0",
		"BUN_JSC_useFTLJIT=0",
		"BUN_JSC_useOMGJIT=0",
	}}, err
}

// declarePlugin marks @opencode-ai/plugin as installed in the config
// folder dir. Every OpenCode start (1.18) installs it there with npm unless
// dir has a node_modules and a package-lock.json that lists each dependency
// package.json does, and a run's first step waits for that install: in a
// fresh HOME, a fetch from the npm registry at every run (or, offline, a
// failed install of 1-2 CPU-s and up to 10 s on a loaded machine). The
// loopback setups run no plugin, so none is needed.
func declarePlugin(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "node_modules"), 0o700); err != nil {
		return err
	}
	deps := map[string]any{"dependencies": map[string]string{"@opencode-ai/plugin": "*"}}
	if err := sandbox.WriteJSON(filepath.Join(dir, "package.json"), deps); err != nil {
		return err
	}
	return sandbox.WriteJSON(filepath.Join(dir, "package-lock.json"), map[string]any{"packages": map[string]any{"": deps}})
}
