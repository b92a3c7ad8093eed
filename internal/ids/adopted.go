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

// SyncedPrefix starts the client id of every row a node synced from the
// native session of a turn it ran: a user row among them is one the agent
// wrote (a repeat of the prompt, a record the CLI adds), never a message
// the user sent through cast.
const SyncedPrefix = "n."

// History says whether a user row with client id cid is history rather
// than a prompt: adopted, or synced from an agent's own session file. No
// node runs it and no delivery cursor waits on it.
func History(cid string) bool {
	return Adopted(cid) || (len(cid) > len(SyncedPrefix) && strings.HasPrefix(cid, SyncedPrefix))
}
