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

// digest identifies a message by its content: everything a reader gives
// but the store's own fields.
func digest(m transcript.Message) string {
	m.Seq, m.ClientID = 0, ""
	b, _ := json.Marshal(m) // a Message always encodes
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// clientID is the id of the n-th (1-based) message with digest d in its
// file: the same message read again gets the same id.
func clientID(d string, n int) string {
	return ClientIDPrefix + d + "." + strconv.Itoa(n)
}
