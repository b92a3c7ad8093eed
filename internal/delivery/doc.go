// Package delivery decides how each turn reaches an agent, and renders what
// the agent missed. It is pure: no I/O, no gRPC, no etcd.
//
// # Native sessions are caches
//
// cast keeps one neutral transcript per session (package transcript). Each
// agent's native session (a Claude JSONL file, a Codex rollout, a Cursor
// chat, ...) is only a cache of it, recorded per (session, agent) as a Row:
// native id, node, path, and KnownUpto, the seq up to which the native
// session holds every row. Before each turn Transition compares that row
// with the content before the new prompt:
//
//	transition    | when                                              | what the agent gets
//	--------------+---------------------------------------------------+------------------------------------------
//	fresh         | no native session, no earlier content             | a new native session, the new message
//	reuse         | native session has seen every content row         | the new message only
//	delta         | native session exists but missed content          | the missed items as a Slice, then the message
//	rebuild       | no native session, earlier content, reconstitutes | a native transcript written from the neutral
//	              |                                                   | copy (trimmed to its window), resumed
//	seed          | no native session, earlier content, cannot        | a fresh session seeded with a Slice
//	              | reconstitute (Cursor, Muse)                       |
//
// A native session on another node than the turn's counts as none.
// Notices (agent switch, handoff, merge, migration and other dividers) and
// internal rows are never content: a native session that missed only
// notices is reused as it is.
//
// # Bookkeeping
//
// Row's methods encode the order that keeps deltas exact: nothing is
// recorded before the runtime accepted the prompt (Row.Accepted), so a
// refused prompt (binary missing, not logged in) marks nothing as seen and
// the retry carries the same handoff; KnownUpto moves forward with max()
// as the reply is stored (Row.Stored), never back. So switching Claude ->
// Codex -> Claude gives Claude a delta of exactly what Codex's turn added,
// never Claude's own earlier answer.
//
// # Slices
//
// Slice renders a delta, a seed or a fork's unmerged work
// as verbatim items (user and assistant text, compaction summaries, shell
// commands as "Command: …\nExit code: N\nOutput:\n…"; other tool calls
// left out) within a byte budget: 16 KiB by default, 64 KiB at most,
// reduced for small context windows to window - max(window/4, 16 Ki)
// (one UTF-8 byte counted as one token), never below zero. Items go in by
// priority (latest compaction summary, last user, last assistant, first
// user, then newest to oldest), an item that does not fit is skipped whole
// while smaller ones still go in, and the result reads in chronological
// order, framed as history, NOT new instructions, with the count left out
// and the exact `cast read ID A:B` ranges to read the rest.
package delivery
