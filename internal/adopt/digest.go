package adopt

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"

	"github.com/cast-dev/cast/internal/transcript"
)

// ClientIDPrefix starts the client id of every adopted row, so a node
// never takes one as a prompt (IsAdopted).
const ClientIDPrefix = "adopt."

// IsAdopted says whether a stored row came from adoption: history the
// user already had with the agent, never a prompt to run.
func IsAdopted(clientID string) bool {
	return len(clientID) > len(ClientIDPrefix) && clientID[:len(ClientIDPrefix)] == ClientIDPrefix
}

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

// clientID is the id of the n-th (1-based) message with digest d in its
// file: the same message read again gets the same id.
func clientID(d string, n int) string {
	return ClientIDPrefix + d + "." + strconv.Itoa(n)
}
