// Package kit is what the agent packages (internal/agents/claude, codex,
// gemini, grok, muse, opencode, pi) share to implement the
// contract in internal/agents: JSON and JSONL reading and writing that
// keeps a user's code as it is (NewEncoder, DecodeElems, WriteJSONL, ...)
// and streams records a writer pulled ahead of its file's header (Ahead),
// a line reader for files of any line length (EachLine), decode reports
// of what a reader left out (Skips, DecodeFile, ReportFile; zstd files
// included), the Read methods of a one-file format (FileReader, Decoding),
// the CLIs' timestamps and a writer's message times (ISOTime,
// MessageTimes), data-URL and base64 images, cast's notice tags, OAuth
// token files kept field for field (TokenFile, TokenLayout), JSON index
// files edited in place (RemoveIndexEntry), and running a CLI in a process
// group of its own (RunGroup).
//
// It builds on the contract (WriteJSONL returns an agents.Written) and
// never the other way round; only packages under internal/agents import
// it (internal/e2e's deps test holds the tree to that): code outside asks
// the contract, not the kit.
package kit
