package gemini

import (
	"encoding/json"
	"strings"

	"github.com/cast-dev/cast/internal/agents/kit"
	"github.com/cast-dev/cast/internal/transcript"
)

// header is the first line of a JSONL session (and the top of a legacy
// .json conversation, which adds Messages).
type header struct {
	SessionID   string   `json:"sessionId"`
	ProjectHash string   `json:"projectHash"`
	StartTime   string   `json:"startTime,omitempty"`
	LastUpdated string   `json:"lastUpdated,omitempty"`
	Kind        string   `json:"kind,omitempty"`
	Summary     string   `json:"summary,omitempty"`
	Messages    []record `json:"messages,omitempty"`
}

// record is one message: "user", "gemini", or UI-only "info", "error",
// "warning" (never sent to the model).
type record struct {
	ID             string          `json:"id"`
	Timestamp      string          `json:"timestamp,omitempty"`
	Type           string          `json:"type"`
	Content        json.RawMessage `json:"content"`
	DisplayContent json.RawMessage `json:"displayContent,omitempty"`
	Thoughts       []thought       `json:"thoughts,omitempty"`
	Tokens         *tokens         `json:"tokens,omitempty"`
	Model          string          `json:"model,omitempty"`
	ToolCalls      []toolCall      `json:"toolCalls,omitempty"`
}

type thought struct {
	Subject     string `json:"subject"`
	Description string `json:"description"`
	Timestamp   string `json:"timestamp,omitempty"`
}

type tokens struct {
	Input    int `json:"input"`
	Output   int `json:"output"`
	Cached   int `json:"cached"`
	Thoughts int `json:"thoughts"`
	Tool     int `json:"tool"`
	Total    int `json:"total"`
}

// toolCall is a call and (when it ran) its result; Result is a Part list
// of functionResponse parts or a plain string.
type toolCall struct {
	ID          string          `json:"id"`
	Name        string          `json:"name"`
	Args        json.RawMessage `json:"args"`
	Result      json.RawMessage `json:"result,omitempty"`
	Status      string          `json:"status,omitempty"`
	Timestamp   string          `json:"timestamp,omitempty"`
	DisplayName string          `json:"displayName,omitempty"`
	Description string          `json:"description,omitempty"`
}

// part is a Gemini API Part, as far as cast needs it. An inlineData image
// is carried (image); FileData and other inline data are read only to be
// reported as left out.
type part struct {
	Text             *string       `json:"text,omitempty"`
	Thought          bool          `json:"thought,omitempty"`
	FunctionCall     *functionCall `json:"functionCall,omitempty"`
	FunctionResponse *functionResp `json:"functionResponse,omitempty"`
	InlineData       *blob         `json:"inlineData,omitempty"`
	FileData         *blob         `json:"fileData,omitempty"`
}

// blob is an inlineData or fileData part: its type and, inline, its
// base64 bytes.
type blob struct {
	MimeType string `json:"mimeType,omitempty"`
	Data     string `json:"data,omitempty"`
}

// image is the picture an inlineData part carries, when it is one an API
// takes.
func (p part) image() (transcript.Image, bool) {
	if p.InlineData == nil {
		return transcript.Image{}, false
	}
	im, err := kit.DecodeImage(p.InlineData.MimeType, p.InlineData.Data)
	return im, err == nil
}

// imageParts are images as inlineData parts.
func imageParts(images []transcript.Image) []part {
	out := make([]part, 0, len(images))
	for _, im := range images {
		out = append(out, part{InlineData: &blob{MimeType: im.MediaType, Data: kit.ImageBase64(im)}})
	}
	return out
}

// leftOut names a part the reader keeps nothing of, for the report.
func (p part) leftOut() string {
	b, what := p.InlineData, "inlineData"
	if b == nil {
		b, what = p.FileData, "fileData"
	}
	switch {
	case b == nil:
		return "part of an unknown kind"
	case strings.HasPrefix(b.MimeType, "image/"):
		return "image part (" + what + ")"
	}
	return what + " part"
}

type functionCall struct {
	ID   string          `json:"id,omitempty"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

type functionResp struct {
	ID       string          `json:"id,omitempty"`
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}
