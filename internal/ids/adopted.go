package ids

import "strings"

// AdoptedPrefix starts the client id of every row a node adopted from an
// agent's own session files (internal/adopt): history the user already had
// with the agent, which no node ever runs as a prompt and no cursor waits
// on.
const AdoptedPrefix = "adopt."

// Adopted says whether the row with client id cid was adopted.
func Adopted(cid string) bool {
	return len(cid) > len(AdoptedPrefix) && strings.HasPrefix(cid, AdoptedPrefix)
}
