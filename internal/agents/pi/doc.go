// Package pi is the agent of pi, the pi coding agent: its registry entry
// (agent.go), driver and login rules, and the reader and writer of its
// session files.
//
// pi 0.73 keeps one JSONL file per session under its agent dir
// (~/.pi/agent, PI_CODING_AGENT_DIR):
// sessions/--<cwd with / \ : as ->--/<ISO time, : and . as ->_<id>.jsonl.
// Line 1 is the header {type:"session", version:3, id, timestamp, cwd}; every
// other line is an entry {type, id, parentId, timestamp, ...}. The entries
// form a tree and the conversation is the chain from the last line back to
// the root.
//
// Facts the writer relies on (observed with the real CLI, see
// shared/research/realclient-pi-grok.md):
//   - a file whose first line is not a valid header is overwritten by pi, so
//     the header always comes first with version 3 (older versions are
//     migrated and rewritten in place);
//   - assistant messages without a usage object, or with string content,
//     crash pi; cast always writes block arrays and a full zero usage;
//   - a broken parent chain silently loses history, so the chain is linear
//     and unbroken and its leaf is the last line;
//   - tool results must follow their call; a result with no call is sent as
//     is and real APIs reject it, so cast turns it into plain user text;
//   - the header cwd must exist on the machine in print/json mode.
package pi
