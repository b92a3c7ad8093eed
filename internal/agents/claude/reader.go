package claude

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/cast-dev/cast/internal/transcript"
)

// Reader reads Claude Code JSONL transcripts. The zero value is ready.
type Reader struct{}

// Stats counts what Parse saw.
type Stats struct {
	Lines     int // non-empty lines
	Malformed int // lines that were not a JSON object or lacked a usable message
	Skipped   int // valid records that carry no conversation (attachments, sidechains, meta, ...)
}

// Read reads the file at path. Malformed lines are skipped; an error is
// returned only when the file cannot be read or nothing at all could be
// parsed from a non-empty file.
func (Reader) Read(path string) ([]transcript.Message, error) {
	msgs, _, err := ReadFile(path)
	return msgs, err
}

// ReadCwd implements agents.CwdReader: the cwd of the newest record that
// has one (Claude Code stamps every record with the folder it ran in).
func (Reader) ReadCwd(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	cwd := ""
	for {
		line, err := br.ReadBytes('\n')
		var rec struct {
			Cwd string `json:"cwd"`
		}
		if json.Unmarshal(line, &rec) == nil && rec.Cwd != "" {
			cwd = rec.Cwd
		}
		if err == io.EOF {
			return cwd, nil
		}
		if err != nil {
			return "", err
		}
	}
}

// ReadFile is Read that also reports what was skipped (import shows it).
func ReadFile(path string) ([]transcript.Message, Stats, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, Stats{}, err
	}
	defer f.Close()
	msgs, st, err := Parse(f)
	if err != nil {
		return nil, st, err
	}
	if len(msgs) == 0 && st.Malformed > 0 && st.Malformed == st.Lines {
		return nil, st, fmt.Errorf("claude: %s: none of %d lines is a Claude Code record", path, st.Lines)
	}
	return msgs, st, nil
}

// entry is a parsed chain record with its position in the file.
type entry struct {
	rec  record
	line int
}

// Parse reads a transcript from r. It follows the conversation Claude itself
// would resume: the chain from the last record back to the root, which skips
// branches abandoned by a rewind. When the chain is broken (old or
// hand-written files with null or dangling parents) it falls back to file
// order, so no turn is lost.
func Parse(r io.Reader) ([]transcript.Message, Stats, error) {
	var st Stats
	var chain, side []entry
	br := bufio.NewReaderSize(r, 1<<20)
	for n := 0; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			st.Lines++
			var rec record
			switch {
			case json.Unmarshal(line, &rec) != nil:
				st.Malformed++
			case rec.IsSidechain:
				// A sub-agent's own conversation: its result reaches the
				// main chain as the Task tool's result. Kept aside for a
				// file that holds nothing else (subagents/agent-*.jsonl).
				st.Skipped++
				if rec.Type == "user" || rec.Type == "assistant" || rec.UUID != "" {
					side = append(side, entry{rec, n})
				}
			case rec.Type == "user" || rec.Type == "assistant":
				if len(rec.Message) == 0 || rec.Message[0] != '{' {
					st.Malformed++
				} else {
					chain = append(chain, entry{rec, n})
				}
			case rec.UUID != "":
				// Attachments, system records, progress: not conversation,
				// but links of the parent chain.
				chain = append(chain, entry{rec, n})
			case rec.Type == "":
				st.Malformed++
			default:
				st.Skipped++ // summary, attachment, queue-operation, last-prompt, mode, ...
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, st, err
		}
	}
	if len(chain) == 0 {
		chain = side
		st.Skipped -= len(side)
	}
	var out []transcript.Message
	for _, e := range activePath(chain) {
		msgs, ok := convert(e.rec)
		if !ok {
			st.Skipped++
		}
		out = append(out, msgs...)
	}
	return out, st, nil
}

// activePath returns the leaf-to-root chain in order when it reaches the
// first record of the file, and every record in file order otherwise.
func activePath(chain []entry) []entry {
	if len(chain) == 0 {
		return nil
	}
	byUUID := make(map[string]int, len(chain))
	for i, e := range chain {
		if e.rec.UUID != "" {
			byUUID[e.rec.UUID] = i
		}
	}
	var path []int
	seen := map[int]bool{}
	for i := len(chain) - 1; ; {
		if seen[i] {
			return chain // a cycle: trust nothing but the file order
		}
		seen[i] = true
		path = append(path, i)
		parent := ""
		if p := chain[i].rec.ParentUUID; p != nil {
			parent = *p
		}
		if parent == "" {
			parent = chain[i].rec.LogicalParentUUID // across a compaction
		}
		if parent == "" {
			break
		}
		j, ok := byUUID[parent]
		if !ok {
			return chain // dangling parent: Claude repairs in file order too
		}
		i = j
	}
	if path[len(path)-1] != 0 {
		return chain
	}
	out := make([]entry, len(path))
	for k, i := range path {
		out[len(path)-1-k] = chain[i]
	}
	return out
}
