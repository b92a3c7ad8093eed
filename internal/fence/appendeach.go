package fence

import (
	"context"
	"strconv"

	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// Appender is the store's append, as AppendEach uses it.
type Appender interface {
	Append(ctx context.Context, sessionID string, msgs []*castv1.Message, g Guard) ([]*castv1.Message, error)
}

// AppendEach stores msgs one at a time under g, keeping as it was first
// stored each one whose client id the store holds with another body
// (CLIENT_ID_REUSED; its seq from the refusal, 0 when the store does not
// say). For a caller resending a range whose rendering may have changed
// since its first attempt (a merge after an agent switch, adoption of a
// file the agent rewrote): refusing the batch would refuse every later
// one too, and each message must be in the session once. Under g.Unmoved
// each append expects the seq the ones before it left.
func AppendEach(ctx context.Context, st Appender, sessionID string, msgs []*castv1.Message, g Guard) ([]*castv1.Message, error) {
	out := make([]*castv1.Message, 0, len(msgs))
	for _, m := range msgs {
		stored, err := st.Append(ctx, sessionID, []*castv1.Message{m}, g)
		if e, ok := errs.As(err); ok && e.Reason == errs.ReasonClientIDReused {
			m.Seq, _ = strconv.ParseInt(e.Metadata["seq"], 10, 64)
			stored, err = []*castv1.Message{m}, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, stored...)
		if g.Unmoved {
			// A new message has the next seq; one kept as stored, an older one.
			g.LastSeq = max(g.LastSeq, stored[0].Seq)
		}
	}
	return out, nil
}
