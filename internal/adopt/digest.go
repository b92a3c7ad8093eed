package adopt

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"

	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/transcript"
)

// digest identifies a message by what it says: its kind, text, tool
// call or result, images and notice type. Not by what a rewrite of the
// file may change around it (its time, model or native id: Gemini's
// resume writes its records again with other metadata).
func digest(m transcript.Message) string {
	b, _ := json.Marshal(transcript.Message{Kind: m.Kind, Text: m.Text, ToolCall: m.ToolCall, ToolResult: m.ToolResult,
		Images: m.Images, NoticeType: m.NoticeType}) // a Message always encodes
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// clientID (ids.AdoptedPrefix, so no node takes the row as a prompt) is
// the id of the n-th (1-based) message with digest d in its
// file: the same message read again gets the same id.
func clientID(d string, n int) string {
	return ids.AdoptedPrefix + d + "." + strconv.Itoa(n)
}
