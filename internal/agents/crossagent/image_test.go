package crossagent

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/transcript"
)

const (
	imageU1     = "MARKER-I1 what is in this picture?"
	imageOut    = "MARKER-IOUT screenshot taken"
	imagePrompt = "MARKER-INEW what did the two images show?"
)

// squarePNG is a small PNG of one colour: two of them are two images.
func squarePNG(t *testing.T, c color.RGBA) transcript.Image {
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	for x := range 4 {
		for y := range 4 {
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return transcript.Image{MediaType: "image/png", Data: b.Bytes()}
}

// imageConversation: an image attached to a user message, and a screenshot
// a read tool returned.
func imageConversation(t *testing.T) ([]transcript.Message, transcript.Image, transcript.Image) {
	attached, shot := squarePNG(t, color.RGBA{R: 255, A: 255}), squarePNG(t, color.RGBA{B: 255, A: 255})
	msgs := []transcript.Message{
		{Kind: transcript.KindUser, Text: imageU1, Images: []transcript.Image{attached}},
		{Kind: transcript.KindAssistant, Text: "MARKER-IA1 a red square; let me take a screenshot", Model: "claude-sonnet-4-5"},
		{Kind: transcript.KindToolCall, Model: "claude-sonnet-4-5", ToolCall: &transcript.ToolCall{ID: "toolu_IMG1", Name: "Read", Input: `{"file_path":"/w/shot.png"}`}},
		{Kind: transcript.KindToolResult, ToolResult: &transcript.ToolResult{CallID: "toolu_IMG1", Output: imageOut}, Images: []transcript.Image{shot}},
		{Kind: transcript.KindAssistant, Text: "MARKER-IA2 the screenshot shows a blue square", Model: "claude-sonnet-4-5"},
	}
	return stamp(msgs, time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)), attached, shot
}

// TestMatrixImages: an attached image and a tool's screenshot, written in
// each source agent's format and imported back, reach the model as images
// when each real target CLI resumes the conversation.
func TestMatrixImages(t *testing.T) {
	_, attached, shot := imageConversation(t)
	matrix(t, ring(imageShift), func(t *testing.T, agent string) []transcript.Message {
		msgs, _, _ := imageConversation(t)
		return importVia(t, agent, "image", msgs)
	}, func(t *testing.T, src, tgt string, msgs []transcript.Message) {
		if err := receivedImages(writeAndResume(t, src, tgt, msgs, imagePrompt, nil), attached, shot); err != nil {
			t.Fatalf("%s->%s: %v", src, tgt, err)
		}
	})
}

// receivedImages checks the text around the images arrived in order and
// each image after what it belongs to: the attached one after the user's
// text, the screenshot after the tool's output.
func receivedImages(items []fakemodel.Item, attached, shot transcript.Image) error {
	text := func(s string) func(fakemodel.Item) bool {
		return func(it fakemodel.Item) bool { return strings.Contains(it.Text, s) }
	}
	img := func(im transcript.Image) func(fakemodel.Item) bool {
		want := fakemodel.ImageText(im.MediaType, im.Data)
		return func(it fakemodel.Item) bool { return it.Kind == fakemodel.KindImage && it.Text == want }
	}
	steps := []step{
		{"the user's text", text("MARKER-I1")},
		{"the attached image", img(attached)},
		{"the tool's output", text("MARKER-IOUT")},
		{"the screenshot", img(shot)},
		{"the answer about it", text("MARKER-IA2")},
		{"the new prompt", text("MARKER-INEW")},
	}
	if n, _ := inOrder(items, steps); n < len(steps) {
		return fmt.Errorf("the model did not receive %s in order; it got:\n%s", steps[n].what, dump(items))
	}
	return nil
}
