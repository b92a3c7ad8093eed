// Package grok is the agent of Grok Build, xAI's own coding CLI ("grok
// 1.x"; not the npm package @vibe-kit/grok-cli, which stores no
// conversation at all): its registry entry (agent.go) and the reader and
// writer of its session folders; it registers no driver.
//
// A session lives under $GROK_HOME (default ~/.grok), which is Target.Home:
// sessions/<percent-encoded cwd>/<session-uuid>/ holds chat_history.jsonl
// (the model context: system, user, reasoning, assistant with tool_calls,
// tool_result and backend_tool_call records, with no timestamps) and
// summary.json (id, cwd, times, title, current model), plus sidecars:
// events.jsonl (tool outcomes) and updates.jsonl, the Agent Client
// Protocol session/update log Grok documents as what drives /resume. The
// writer writes all four; the reader reads a folder that has only
// updates.jsonl from it (chunks joined, tool_call_update status as the
// outcome). The updates.jsonl shape is the samples' plus ACP's
// tool_call_update (which the samples lack); the real CLI was not run.
//
// Grok Build ships as a binary, not through npm, and cannot be installed in
// cast's test environment, so neither the reader nor the writer is checked
// against the real CLI: both are modelled on, and tested against, the
// third-party sample sessions in testdata (from specstoryai/getspecstory,
// whose notes say Grok 1.0.34 resumed hand-written folders of this shape:
// wrapped user prompts with consecutive prompt_index values, no system
// record, and a summary.json with session_summary and current_model_id).
// Before relying on the writer, resume one of its folders with the real
// `grok --resume <id>`.
//
// Choices the writer makes that the samples cannot confirm: thinking is not
// written (Grok's reasoning records carry encrypted content the xAI API
// expects back, which a foreign transcript does not have); cast notices
// are not written (the format has no UI-only record); tool calls and results
// are written in Grok's own record shapes, repaired so every call has a
// result and no result lacks its call.
package grok
