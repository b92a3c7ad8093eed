// Package crossagent holds the cross-agent matrix test: the proof that a
// conversation one agent's real CLI produced continues in every other
// agent's real CLI with nothing lost. It has no code besides its tests.
//
// For each of the five runnable CLIs (claude, codex, gemini, pi, opencode)
// a source conversation is produced once per test run (by the first of its
// pairs to need it), with the real CLI against a fake model
// (internal/fakemodel), using the agent's own headless and resume commands
// from the registry: a first user turn that the fake answers with a shell
// tool call (the CLI really runs it), the tool result and an assistant
// text, then a second user turn and its answer. That fake is not strict:
// cast has not touched the session yet, and Gemini CLI 0.61 itself resends
// a tool result twice when it resumes a session it wrote. The native
// transcript the CLI left is read with the agent's reader (for OpenCode:
// what `opencode export` prints) into neutral messages, which must hold
// both user turns, the assistant texts and the call/result pair.
//
// Then, for every pair source->target (25, same->same included), the
// neutral messages are written with the target's writer into a fresh
// isolated home (agenttest.Env), the real target CLI resumes that session
// with the registry's resume command and a new prompt against a fresh,
// strict fake model, and the last conversation request the fake recorded
// must hold, in order, every user turn, every assistant text and every
// tool call with its result (the result answering that call's id), with
// the new prompt last.
//
// TestMatrixHard carries a harder conversation, written by hand: user
// text that looks like CLI markup (a typed <system-reminder>), a turn with
// thinking and two parallel shell calls, one answering with a 50 KB
// output, and a second turn. It is written in each source's native format
// and read back with its reader (OpenCode: loaded with `opencode import`,
// read from `opencode export`), as `cast import` would; then each real
// target CLI resumes it, and the model must receive the typed text, both
// calls before their results, each result answering its call, the 50 KB
// output whole and every turn in order. Codex's home sets
// tool_output_token_limit (Codex keeps ~10 KB of a tool output for a
// model it does not know, its own outputs included).
// TestHardCheckerCatchesLoss proves its check rejects each defect it is
// there to catch.
//
// TestMatrixSubagent carries a subagent's run: the real Claude (Agent),
// Codex (spawn_agent, wait_agent), Gemini (invoke_agent) and OpenCode
// (task) spawn one against the fake, whose policy answers the subagent's
// own requests (a shell call of its own, then its answer); pi, which has
// no subagent tool, holds the same main chain written by its writer. The
// main session must read with the spawning call and the subagent's answer
// and nothing of the run, the run's file must read as a subagent's run
// naming the main session (agents.SubagentReader), and each target's
// model must get the main chain in order and none of the run.
// TestSubagentCheckerCatchesLoss proves that check.
//
// TestMatrix, the conversation the real CLIs produced, resumes each in one
// other agent's CLI, and Gemini's and pi's in their own (7 pairs: the
// other agents' packages resume their own, ownElsewhere). TestMatrixHard
// and the feature matrices (TestMatrixCompacted, TestMatrixImages,
// TestMatrixLongTurn, TestMatrixSubagent) resume 5 each in the default
// run, source i -> target i+k, each feature matrix with a k of its own
// (TestMatrixHard shares k=1 with TestMatrixCompacted), so each
// conversation goes from every agent's writer into every agent's CLI and
// every cross pair carries one feature (pairs_test.go); CAST_MATRIX=full
// runs all 25 of each.
//
// Subtests are named source->target and run in parallel, at most
// maxConcurrent (3) CLI sessions at a time; TestMain raises go test's
// default -parallel to that where GOMAXPROCS is lower, an explicit
// -parallel wins. Every CLI run has a timeout. A pair that cannot work
// fails; nothing is skipped. TestCheckerCatchesLoss proves, without any
// CLI, that the check rejects each kind of loss.
//
//	go test ./internal/agents/crossagent -run 'TestMatrix/claude->' -v
package crossagent
