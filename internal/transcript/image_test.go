package transcript

import (
	"strings"
	"testing"
)

func TestImageValidate(t *testing.T) {
	png := Image{MediaType: "image/png", Data: []byte("\x89PNG")}
	for _, tc := range []struct {
		name string
		m    Message
		err  string
	}{
		{"user image", Message{Kind: KindUser, Text: "see", Images: []Image{png}}, ""},
		{"tool result image", Message{Kind: KindToolResult, ToolResult: &ToolResult{CallID: "c"}, Images: []Image{png}}, ""},
		{"assistant image", Message{Kind: KindAssistant, Text: "x", Images: []Image{png}}, "carries images"},
		{"unknown type", Message{Kind: KindUser, Images: []Image{{MediaType: "image/tiff", Data: []byte("x")}}}, "not one of"},
		{"no data", Message{Kind: KindUser, Images: []Image{{MediaType: "image/png"}}}, "without data"},
		{"too large", Message{Kind: KindUser, Images: []Image{{MediaType: "image/png", Data: make([]byte, MaxImageBytes+1)}}}, "over the"},
	} {
		err := tc.m.Validate()
		if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		}
	}
	if d := png.Digest(); len(d) != 64 {
		t.Errorf("digest %q is not sha256 hex", d)
	}
}
