package kit

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/cast-dev/cast/internal/transcript"
)

// Every agent format carries an image as base64 text beside its media
// type, or as a data URL (Codex, OpenCode); these are the one place both
// are read and written.

// SkipImage is the kind a reader counts an image it cannot carry under
// (a URL or file reference with no bytes, a type no API takes, bytes that
// do not decode).
const SkipImage = "image without carried bytes"

// DecodeImage reads base64 data of mediaType as a neutral image; an image
// no agent could send is an error.
func DecodeImage(mediaType, b64 string) (transcript.Image, error) {
	data, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return transcript.Image{}, fmt.Errorf("image data: %w", err)
	}
	im := transcript.Image{MediaType: mediaType, Data: data}
	return im, im.Validate()
}

// ParseDataURL reads a data:<type>;base64,<data> URL as a neutral image.
func ParseDataURL(url string) (transcript.Image, error) {
	rest, ok := strings.CutPrefix(url, "data:")
	mediaType, b64, ok2 := strings.Cut(rest, ";base64,")
	if !ok || !ok2 {
		return transcript.Image{}, fmt.Errorf("image URL is not a base64 data URL")
	}
	return DecodeImage(mediaType, b64)
}

// AttachImage adds im to the user message that ends out, the text it was
// sent with, and says whether there was one; when there was none, the
// reader makes im a user message of its own.
func AttachImage(out []transcript.Message, im transcript.Image) bool {
	n := len(out)
	if n == 0 || out[n-1].Kind != transcript.KindUser {
		return false
	}
	out[n-1].Images = append(out[n-1].Images, im)
	return true
}

// ImageBase64 is the image's bytes as standard base64.
func ImageBase64(im transcript.Image) string { return base64.StdEncoding.EncodeToString(im.Data) }

// DataURL is the image as a data URL.
func DataURL(im transcript.Image) string {
	return "data:" + im.MediaType + ";base64," + ImageBase64(im)
}
