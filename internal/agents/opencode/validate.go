package opencode

import (
	"fmt"
	"strings"
)

// Validate checks what `opencode import` requires, before it runs: import
// is not atomic, so a document it refuses halfway would leave a partial
// session behind.
func Validate(ex Export) error {
	in := ex.Info
	if !strings.HasPrefix(in.ID, "ses_") || in.Slug == "" || in.Version == "" || in.Time.Created == 0 {
		return fmt.Errorf("opencode: session header needs id ses_..., slug, version and time")
	}
	prev := ""
	users := map[string]bool{}
	for i, m := range ex.Messages {
		mi := m.Info
		if !strings.HasPrefix(mi.ID, "msg_") || mi.ID <= prev || mi.SessionID != in.ID || mi.Time.Created == 0 || mi.Agent == "" {
			return fmt.Errorf("opencode: message %d (%s): needs an ascending msg_ id, the session id, time and agent", i, mi.ID)
		}
		prev = mi.ID
		switch mi.Role {
		case "user":
			if mi.Model == nil || mi.Model.ProviderID == "" || mi.Model.ModelID == "" {
				return fmt.Errorf("opencode: user message %s needs a model", mi.ID)
			}
			users[mi.ID] = true
		case "assistant":
			if !users[mi.ParentID] || mi.Mode == "" || mi.Path == nil || mi.Cost == nil || mi.Tokens == nil || mi.ModelID == "" || mi.ProviderID == "" {
				return fmt.Errorf("opencode: assistant message %s needs an earlier user parent, mode, path, cost, tokens and model", mi.ID)
			}
		default:
			return fmt.Errorf("opencode: message %s has role %q", mi.ID, mi.Role)
		}
		for _, p := range m.Parts {
			if !strings.HasPrefix(p.ID, "prt_") || p.SessionID != in.ID || p.MessageID != mi.ID {
				return fmt.Errorf("opencode: part %q of message %s needs a prt_ id and matching session and message ids", p.ID, mi.ID)
			}
			if p.Type == "tool" && (p.CallID == "" || p.Tool == "" || p.State == nil || p.State.Time == nil ||
				(p.State.Status != "completed" && p.State.Status != "error")) {
				return fmt.Errorf("opencode: tool part %s needs a call id, a tool and a finished state", p.ID)
			}
		}
	}
	return nil
}
