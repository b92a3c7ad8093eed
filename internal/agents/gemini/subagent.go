package gemini

import (
	"encoding/json"
	"path/filepath"
	"strings"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/kit"
	"github.com/cast-dev/cast/internal/transcript"
)

// ReadSubagent implements agents.SubagentReader: a session whose header
// kind is "subagent", which the CLI keeps in a folder named after its
// parent session (chats/<parent id>/<id>.jsonl). The spawning call is the
// parent's invoke_agent call whose prompt is the run's first user text
// (the only one, where the parent made one call), found in the parent's
// file beside the folder.
func (Reader) ReadSubagent(path string) (agents.Subagent, bool, error) {
	d, err := kit.DecodeFile(path, DecodeFrom)
	if err != nil || d.Kind != "subagent" {
		return agents.Subagent{}, false, err
	}
	s := agents.Subagent{Kind: "subagent"}
	if dir := filepath.Dir(path); filepath.Base(filepath.Dir(dir)) == "chats" {
		s.ParentNativeID = filepath.Base(dir)
		s.CallID = invokeCall(filepath.Dir(dir), s.ParentNativeID, firstUserText(d.Messages))
	}
	return s, true, nil
}

// invokeCall is the invoke_agent call of the parent session in chats whose
// prompt is prompt ("" when none is found).
func invokeCall(chats, parent, prompt string) string {
	files, _ := sessionFiles(chats, parent)
	var calls []*transcript.ToolCall
	most := -1 // the parent's fullest file: a resume leaves a stray header-only one
	for _, f := range files {
		pd, err := kit.DecodeFile(f, DecodeFrom)
		if err != nil || pd.SessionID != parent || len(pd.Messages) <= most {
			continue
		}
		most, calls = len(pd.Messages), nil
		for _, m := range pd.Messages {
			if m.ToolCall != nil && m.ToolCall.Name == "invoke_agent" {
				calls = append(calls, m.ToolCall)
			}
		}
	}
	for _, c := range calls {
		var in struct {
			Prompt string `json:"prompt"`
		}
		if json.Unmarshal([]byte(c.Input), &in) == nil && prompt != "" && strings.TrimSpace(in.Prompt) == prompt {
			return c.ID
		}
	}
	if len(calls) == 1 {
		return calls[0].ID
	}
	return ""
}

// firstUserText is the first user message's text, trimmed.
func firstUserText(msgs []transcript.Message) string {
	for _, m := range msgs {
		if m.Kind == transcript.KindUser {
			return strings.TrimSpace(m.Text)
		}
	}
	return ""
}
