// Package gemini is Gemini CLI's agent: its registry entry (agent.go),
// driver and login rules, and the reader and writer of its own session
// files.
//
// Gemini CLI 0.61 records a session as a JSONL event log under
// <home>/tmp/<slug>/chats/session-<YYYY-MM-DDTHH-MM>-<sid8>.jsonl, where
// <home> is the ~/.gemini folder: a metadata header line, then message
// records that are upserts by id, {"$set":{...}} metadata merges (a $set of
// "messages" replaces the whole list) and {"$rewindTo":id} truncations. Older
// versions wrote one JSON object with a "messages" array; the reader accepts
// both. The writer emits the JSONL form, loadable with
// `gemini --session-file F` or, because it also registers the project,
// `gemini --resume <id>` from the project directory.
//
// Facts the writer relies on (observed, see shared/research):
//   - user text whose trimmed form starts with "/", "?", "<session_context>"
//     or "<hook_context>", or is empty, is silently dropped on resume, so such
//     text is prefixed with EscapePrefix;
//   - a tool call without a result becomes an orphan functionCall, so every
//     call gets a result (a synthetic one when the source had none);
//   - results go only in toolCalls[].result, never also as a separate
//     functionResponse record, or Gemini sends them twice;
//   - thoughts are never sent back to the model; they are written for the UI.
package gemini
