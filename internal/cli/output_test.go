package cli

import (
	"testing"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// A row's pictures are named in `cast read` and `cast watch`: a tool
// result or a user message that is only a picture printed a blank line.
func TestFormatMessageNamesImages(t *testing.T) {
	png := &castv1.Image{MediaType: "image/png", Data: make([]byte, 3000)}
	for _, tc := range []struct {
		name string
		m    *castv1.Message
		want string
	}{
		{"a tool result that is only an image",
			&castv1.Message{Seq: 4, Kind: castv1.MessageKind_MESSAGE_KIND_TOOL_RESULT, ToolResult: &castv1.ToolResult{}, Images: []*castv1.Image{png}},
			"#4 tool_result\n  [image: image/png, 3000 bytes]\n"},
		{"a user message with text and two images",
			&castv1.Message{Seq: 2, Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "look", Images: []*castv1.Image{png, {MediaType: "image/jpeg", Data: []byte("x")}}},
			"#2 user\n  look\n  [image: image/png, 3000 bytes]\n  [image: image/jpeg, 1 bytes]\n"},
		{"no image",
			&castv1.Message{Seq: 1, Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "hi"},
			"#1 user\n  hi\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := formatMessage(tc.m); got != tc.want {
				t.Errorf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}
