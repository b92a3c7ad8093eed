package node

import (
	"strconv"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/transcript"
)

// The control plane's store refuses a message over its size limit
// (MESSAGE_TOO_LARGE, the limit in the refusal's limit_bytes). The node
// fits what it sends (adopted messages, its own turns' rows) to the limit
// its last refusal said, the store's default until one did: a control
// plane configured lower refused the same row at every try for ever.

// maxMessageBytes is the limit the node fits messages to.
func (a *Daemon) maxMessageBytes() int {
	if n := a.msgLimit.Load(); n > 0 {
		return int(n)
	}
	return transcript.DefaultMaxMessageBytes
}

// learnMessageLimit notes the limit a MESSAGE_TOO_LARGE refusal names, and
// says whether err was one.
func (a *Daemon) learnMessageLimit(err error) bool {
	if client.ReasonOf(err) != errs.ReasonMessageTooLarge {
		return false
	}
	if n, perr := strconv.ParseInt(client.MetadataOf(err, "limit_bytes"), 10, 64); perr == nil && n > 0 {
		a.msgLimit.Store(n)
	}
	return true
}
