package claude

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/kit"
	"github.com/cast-dev/cast/internal/transcript"
)

// outBlock is a content block as written (structs, not maps: the writer
// renders 100k-message sessions and map encoding sorts keys every time).
type outBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   any             `json:"content,omitempty"` // tool_result: a string, or blocks with images
	IsError   *bool           `json:"is_error,omitempty"`
	Source    *imageSource    `json:"source,omitempty"` // image
}

// imageBlocks are images as the API's image blocks.
func imageBlocks(images []transcript.Image) []outBlock {
	out := make([]outBlock, 0, len(images))
	for _, im := range images {
		out = append(out, outBlock{Type: "image", Source: &imageSource{Type: "base64", MediaType: im.MediaType, Data: kit.ImageBase64(im)}})
	}
	return out
}

// line is one written record, in the field order the CLI itself uses.
type line struct {
	ParentUUID  *string `json:"parentUuid"`
	IsSidechain bool    `json:"isSidechain"`
	UserType    string  `json:"userType"`
	Cwd         string  `json:"cwd"`
	SessionID   string  `json:"sessionId"`
	Version     string  `json:"version"`
	Type        string  `json:"type"`
	IsMeta      bool    `json:"isMeta,omitempty"`
	Message     any     `json:"message"`
	UUID        string  `json:"uuid"`
	Timestamp   string  `json:"timestamp"`
}

type userMessage struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

type assistantMessage struct {
	ID           string     `json:"id"`
	Type         string     `json:"type"`
	Role         string     `json:"role"`
	Model        string     `json:"model"`
	Content      []outBlock `json:"content"`
	StopReason   string     `json:"stop_reason"`
	StopSequence *string    `json:"stop_sequence"`
	Usage        usage      `json:"usage"`
}

type usage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// lines serializes turns on one unbroken parent chain with strictly
// increasing timestamps (Claude orders and repairs by them).
func lines(w io.Writer, t agents.Target, id string, turns []turn) error {
	enc := kit.NewEncoder(w)
	lastAssistant := -1
	for i, tu := range turns {
		if tu.role == "assistant" {
			lastAssistant = i
		}
	}
	var parent *string
	prev := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, tu := range turns {
		ts := tu.at.UTC()
		if !ts.After(prev) {
			ts = prev.Add(time.Millisecond)
		}
		prev = ts
		lineID := uuid.NewSHA1(namespace, fmt.Appendf(nil, "%s:%d", id, i)).String()
		rec := line{
			ParentUUID: parent, UserType: "external", Cwd: t.Cwd, SessionID: id, Version: CLIVersion,
			Type: tu.role, IsMeta: tu.meta, UUID: lineID, Timestamp: kit.ISOTime(ts),
		}
		if tu.role == "assistant" {
			model := tu.model
			if model == "" || model == "<synthetic>" {
				model = t.Model
			}
			if i == lastAssistant && t.Model != "" {
				model = t.Model // the model the next turn should use
			}
			if model == "" {
				model = DefaultModel
			}
			stop := "end_turn"
			if tu.hasCall {
				stop = "tool_use"
			}
			sum := sha1.Sum([]byte(lineID))
			rec.Message = assistantMessage{
				ID: "msg_cast_" + hex.EncodeToString(sum[:12]), Type: "message", Role: "assistant",
				Model: model, Content: tu.blocks, StopReason: stop,
			}
		} else if tu.blocks != nil {
			rec.Message = userMessage{Role: "user", Content: tu.blocks}
		} else {
			rec.Message = userMessage{Role: "user", Content: tu.text}
		}
		if err := enc.Encode(rec); err != nil {
			return fmt.Errorf("claude: encode line %d: %w", i, err)
		}
		parent = &rec.UUID
	}
	return nil
}
