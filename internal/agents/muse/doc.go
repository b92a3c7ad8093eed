// Package muse is the agent of Muse, Meta's coding agent: its registry
// entry (agent.go) and the reader of its session record logs.
//
// A Muse session is an append-only JSONL log of runtime records. Each record
// has an envelope (schema_version, id, stream {kind, id}, sequence,
// recorded_at in microseconds since the epoch, payload_type) around a
// payload: runtime.session.metadata records carry the model and workspace
// root; runtime.session records of payload kind "run" carry the turn's
// events (started with the user's prompt, reasoning_committed,
// assistant_message_committed, assistant_tool_calls_committed,
// tool_result_batch_committed, model_completed with token usage, terminal).
// Records of payload kind "task" in the session stream are status noise.
//
// One file can interleave several streams: the session's own and those of
// subagent tasks (stream kind "task"), each numbered by its own sequence.
// The reader keeps only the session stream (the first stream of kind
// "session" in the file), orders it by sequence, and counts the rest in
// Decoded.Foreign: a subagent's prompt and prose are never the session's.
// Encrypted-only reasoning is dropped; malformed lines are skipped and
// counted in Decoded.Skipped, never fatal.
//
// Muse's CLI cannot be installed in cast's test environment, so the reader
// is not checked against the real CLI: it is modelled on, and tested
// against, the third-party sample sessions in testdata (from
// specstoryai/getspecstory). There is no writer: Muse cannot take over an
// existing session's history (the registry's CanReconstitute is false), but
// its sessions can be imported (`cast import --agent muse FILE`) and moved
// out to other agents.
package muse
