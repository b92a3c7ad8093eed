package node

import (
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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

// A control plane configured to take smaller requests (its MaxRecvBytes)
// than the node's batches (syncBatchBytes, adoption's 4 MiB) refuses
// them in gRPC itself: RESOURCE_EXHAUSTED without a reason (cast's own
// refusals, a rate limit or a message too large, carry one). Sent again
// as they were, they were refused at every try; the node halves its
// batches at each such refusal instead, until they pass.

// maxBatchBytes bounds the messages (encoded) of one request.
func (a *Daemon) maxBatchBytes() int {
	if n := a.batchLimit.Load(); n > 0 {
		return int(n)
	}
	return syncBatchBytes
}

// learnBatchLimit notes, when err is gRPC's refusal of a request too
// large, that batches must stay under half of sent (the encoded size of
// the messages refused), and says whether it was one.
func (a *Daemon) learnBatchLimit(err error, sent int) bool {
	if status.Code(err) != codes.ResourceExhausted || client.ReasonOf(err) != "" {
		return false
	}
	half := int64(max(sent/2, 1))
	for {
		cur := a.batchLimit.Load()
		if cur > 0 && cur <= half {
			return true
		}
		if a.batchLimit.CompareAndSwap(cur, half) {
			return true
		}
	}
}
