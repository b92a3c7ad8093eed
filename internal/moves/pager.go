package moves

import (
	"context"
	"fmt"

	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// listPageSize is how many messages one page of a move's read asks for;
// the store bounds each page in bytes too, so a page may hold fewer.
const listPageSize = 500

// eachMessage calls fn with every message of id with start <= seq <= end
// in order, following page tokens (pages are bounded in bytes, so any page
// may stop short of end). It is the one pager the moves read through, as
// client.EachMessage is for the node and the CLI.
func eachMessage(ctx context.Context, st Store, id string, start, end int64, fn func(*castv1.Message) error) error {
	tok, last := "", int64(0)
	for {
		page, next, err := st.ListMessages(ctx, id, start, end, listPageSize, tok)
		if err != nil && tok != "" && last > 0 && errs.HasReason(err, errs.ReasonBadPageToken) {
			// Compacted past the token's revision: stored messages never
			// change, so the rest reads the same from a fresh first page.
			tok, start = "", last+1
			page, next, err = st.ListMessages(ctx, id, start, end, listPageSize, tok)
		}
		if err != nil {
			return err
		}
		for _, m := range page {
			if err := fn(m); err != nil {
				return err
			}
			last = m.Seq
		}
		if next == "" {
			return nil
		}
		if len(page) == 0 {
			return fmt.Errorf("session %s: an empty page with a page token", id)
		}
		tok = next
	}
}
