package crossagent

import (
	"encoding/json"
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents/sandbox"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/transcript"
)

// TestImageOnlyUserMessage: a user message that is only an image (pasted
// with no words), written by each target's writer, resumes in the real CLI
// against a strict fake, which refuses an empty text block as the real
// Anthropic and Gemini APIs do, and the image reaches the model. pi also
// runs on Gemini's API (pi-google): on the Chat API its fake provider
// speaks here, an empty text part is taken, as OpenAI takes it.
func TestImageOnlyUserMessage(t *testing.T) {
	pic := squarePNG(t, color.RGBA{G: 255, A: 255})
	msgs := stamp([]transcript.Message{
		{Kind: transcript.KindUser, Images: []transcript.Image{pic}},
		{Kind: transcript.KindAssistant, Text: "MARKER-IO1 a green square", Model: "claude-sonnet-4-5"},
	}, time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	targets := map[string]func(t *testing.T, c *cli){}
	for _, a := range runnable {
		targets[a] = nil
	}
	targets["pi-google"] = piOnGemini
	for name, setup := range targets {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			slot(t)
			tgt, adjust := name, func(*cli) {}
			if setup != nil {
				tgt, adjust = "pi", func(c *cli) { setup(t, c) }
			}
			items := writeAndResume(t, "neutral", tgt, msgs, "MARKER-IONEW what was it?", adjust)
			want := fakemodel.ImageText(pic.MediaType, pic.Data)
			steps := []step{
				{"the image", func(it fakemodel.Item) bool { return it.Kind == fakemodel.KindImage && it.Text == want }},
				{"the answer about it", func(it fakemodel.Item) bool {
					return it.Kind == fakemodel.KindText && strings.Contains(it.Text, "MARKER-IO1")
				}},
				{"the new prompt", func(it fakemodel.Item) bool {
					return it.Kind == fakemodel.KindText && strings.Contains(it.Text, "MARKER-IONEW")
				}},
			}
			if n, _ := inOrder(items, steps); n < len(steps) {
				t.Fatalf("the model did not receive %s in order; it got:\n%s", steps[n].what, dump(items))
			}
		})
	}
}

// piOnGemini points pi's loopback provider at the fake's Gemini API, a
// provider pi users pick, whose wire refuses an empty text part.
func piOnGemini(t *testing.T, c *cli) {
	path := filepath.Join(c.nativeHome(), "models.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]map[string]map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	p := cfg["providers"][sandbox.FakeProvider]
	p["api"], p["baseUrl"] = "google-generative-ai", c.fake.URL+"/v1beta"
	delete(p, "compat")
	if b, err = json.Marshal(cfg); err == nil {
		err = os.WriteFile(path, b, 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
}
