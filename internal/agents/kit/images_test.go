package kit

import (
	"bytes"
	"testing"

	"github.com/cast-dev/cast/internal/transcript"
)

func TestImageCodings(t *testing.T) {
	im := transcript.Image{MediaType: "image/png", Data: []byte{0x89, 'P', 'N', 'G'}}
	back, err := ParseDataURL(DataURL(im))
	if err != nil || back.MediaType != im.MediaType || !bytes.Equal(back.Data, im.Data) {
		t.Fatalf("data URL round trip: %+v, %v", back, err)
	}
	back, err = DecodeImage(im.MediaType, ImageBase64(im))
	if err != nil || !bytes.Equal(back.Data, im.Data) {
		t.Fatalf("base64 round trip: %+v, %v", back, err)
	}
	for name, url := range map[string]string{
		"https URL":    "https://example.com/a.png",
		"not base64":   "data:image/png;base64,%%%",
		"no ;base64,":  "data:image/png,abc",
		"unknown type": "data:image/tiff;base64,AAAA",
		"empty":        "data:image/png;base64,",
	} {
		if _, err := ParseDataURL(url); err == nil {
			t.Errorf("%s: %q read as an image", name, url)
		}
	}
}

// An image goes with the user text just before it; after anything else
// (or first) it stands alone.
func TestAttachImage(t *testing.T) {
	im := transcript.Image{MediaType: "image/png", Data: []byte{1}}
	user := []transcript.Message{{Kind: transcript.KindAssistant}, {Kind: transcript.KindUser, Text: "look"}}
	if !AttachImage(user, im) || len(user[1].Images) != 1 || len(user[0].Images) != 0 {
		t.Errorf("after user text: %+v", user)
	}
	for _, out := range [][]transcript.Message{nil, {{Kind: transcript.KindAssistant}}} {
		if AttachImage(out, im) {
			t.Errorf("attached to %+v", out)
		}
	}
}
