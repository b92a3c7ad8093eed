package transcript

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
)

// Image is a picture a user attached or a tool returned (a screenshot a
// read tool took), kept whole so every agent whose API takes images gets
// it; Data is the raw bytes, not base64.
type Image struct {
	MediaType string `json:"media_type"`
	Data      []byte `json:"data"`
}

// ImageTypes are the media types every agent API that takes images
// accepts; an image of another type is left out where it is read (and
// reported there), not carried to an API that would refuse the request.
var ImageTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// MaxImageBytes bounds one image: the providers' own limits are about 5 MB
// (Anthropic) to 20 MB; the smallest is what every target takes.
const MaxImageBytes = 5 << 20

// Digest is the image's sha256 in hex: a short name for it in reports,
// logs and tests.
func (im Image) Digest() string {
	sum := sha256.Sum256(im.Data)
	return hex.EncodeToString(sum[:])
}

// Validate reports what makes im one no agent could send.
func (im Image) Validate() error {
	switch {
	case !slices.Contains(ImageTypes, im.MediaType):
		return fmt.Errorf("transcript: image type %q is not one of %v", im.MediaType, ImageTypes)
	case len(im.Data) == 0:
		return fmt.Errorf("transcript: image without data")
	case len(im.Data) > MaxImageBytes:
		return fmt.Errorf("transcript: image of %d bytes is over the %d limit", len(im.Data), MaxImageBytes)
	}
	return nil
}
