package claude

import (
	"encoding/json"
)

// withParallelBranches adds to path (the leaf-to-root chain) what Claude
// Code itself puts back when it resumes: parallel tool calls. One API answer
// with several tool_use blocks is written as one record per block, all with
// the answer's message id, and each tool_result record hangs off the call it
// answers. That makes a branch per call, and the walk from the last record
// sees only one of them. Siblings of an answer on the path (same message id,
// blocks not already there) and the results of calls on the path (results
// not already there) come back, in file order. Abandoned rewinds stay out:
// a rewound prompt is neither an answer on the path nor a tool result.
func withParallelBranches(chain, path []entry) []entry {
	if len(path) == len(chain) {
		return path // the file order fallback holds everything already
	}
	in := make(map[int]bool, len(path)) // by line
	msgIDs, blockIDs, calls, results := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	take := func(e entry) {
		in[e.line] = true
		for id, kind := range blockIDsOf(e.rec) {
			blockIDs[id] = true
			switch kind {
			case "tool_use":
				calls[id] = true
			case "tool_result":
				results[id] = true
			}
		}
		if id := messageID(e.rec); id != "" && e.rec.Type == "assistant" {
			msgIDs[id] = true
		}
	}
	for _, e := range path {
		take(e)
	}
	// Each pass adds at least one record or ends; a result may only come
	// back after the sibling holding its call did.
	for added := true; added; {
		added = false
		for _, e := range chain {
			if in[e.line] || !belongs(e.rec, msgIDs, blockIDs, calls, results) {
				continue
			}
			take(e)
			added = true
		}
	}
	out := make([]entry, 0, len(in))
	for _, e := range chain {
		if in[e.line] {
			out = append(out, e)
		}
	}
	return out
}

// belongs reports whether rec is a sibling block of an answer on the path,
// or the result of a call on the path, that the path does not hold yet.
func belongs(rec record, msgIDs, blockIDs, calls, results map[string]bool) bool {
	ids := blockIDsOf(rec)
	if len(ids) == 0 {
		return false
	}
	for id, kind := range ids {
		if blockIDs[id] && (kind != "tool_result" || results[id]) {
			return false // already there: a duplicate line, not a branch
		}
	}
	switch rec.Type {
	case "assistant":
		return msgIDs[messageID(rec)] && messageID(rec) != ""
	case "user":
		for id, kind := range ids {
			if kind != "tool_result" || !calls[id] {
				return false
			}
		}
		return true
	}
	return false
}

// messageID is the API message id of an assistant record.
func messageID(rec record) string {
	var m apiMessage
	if json.Unmarshal(rec.Message, &m) != nil {
		return ""
	}
	return m.ID
}

// blockIDsOf maps the ids of rec's tool_use and tool_result blocks to their
// kind (a tool_result is keyed by the call it answers).
func blockIDsOf(rec record) map[string]string {
	var m apiMessage
	if json.Unmarshal(rec.Message, &m) != nil {
		return nil
	}
	out := map[string]string{}
	for _, b := range blocks(m.Content) {
		switch {
		case b.Type == "tool_use" && b.ID != "":
			out[b.ID] = b.Type
		case b.Type == "tool_result" && b.ToolUseID != "":
			out[b.ToolUseID] = b.Type
		}
	}
	return out
}
