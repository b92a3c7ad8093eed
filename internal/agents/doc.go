// Package agents is the contract between cast and the coding-agent CLIs
// it drives: what cast knows of each and asks of its package.
//
// The contract: the registry entry (Agent: binary, capabilities, commands,
// fork cut, login, loopback set-up) that each agent package
// (internal/agents/claude, codex, cursor, gemini, pi, opencode, grok,
// muse) defines (its agent.go: agents.Define), the Codec (its native
// transcript's Reader and Writer, with Target and Written) that all but
// cursor register, the Driver (how the runner runs its CLI headless and
// follows a turn) that the five cast runs (claude, codex, gemini, pi,
// opencode) register, and the optional interfaces a driver may add
// (session listing and removal, cwd indexes, subagent runs, MCP servers,
// token custody's login format and refresher). internal/agents/codecs,
// the catalog, links them all; only the binaries (cmd/), the tests'
// harness (internal/testharness) and tests link it, so
// a binary knows the agents it links and every other package asks here
// by name (ReaderFor, WriterFor, CredentialFor, RefresherFor). Beside
// the contract are the few services that hosts (runner, node, canary,
// adopt, cli, the control plane) use through it: Lookup, native ids, installed versions,
// titles, a turn's environment.
//
// What the agent packages share to implement the contract (JSONL, lines,
// decode reports, token files, process groups, images, notices) is
// internal/agents/kit, which builds on this package.
//
// Everything about one agent lives under this folder: code elsewhere asks
// the registry or the driver and never switches on an agent's name
// (names_test.go holds the tree to that).
package agents
