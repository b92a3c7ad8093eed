// Package agents is what cast knows of the coding-agent CLIs it drives,
// and the kit their packages share.
//
// The contract: the registry entry (Agent: binary, capabilities, commands,
// fork cut, login, loopback set-up), the Codec (its native transcript's
// Reader and Writer) and the Driver (how the runner runs its CLI headless
// and follows a turn) that each agent package (internal/agents/claude,
// codex, cursor, gemini, pi, opencode, grok, muse) defines and registers
// (its agent.go: agents.Define); internal/agents/codecs, the catalog, links
// them all, so a binary knows the agents it links. The kit:
// JSONL and line readers, decode reports, token files, process groups,
// install versions and titles, shared by those packages.
//
// Everything about one agent lives under this folder: code elsewhere asks
// the registry or the driver and never switches on an agent's name
// (names_test.go holds the tree to that).
package agents
