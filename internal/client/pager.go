package client

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// EachMessage calls fn with every message of req's seq range in order,
// following page tokens: pages are bounded in bytes as well as in
// messages, so any page may stop short of the range's end. req's page
// token is where it starts (usually empty). perPage > 0 bounds each page's
// request (the CLI's --timeout is per request), not the whole read. It is
// the one pager every range read of a node or the CLI goes through.
func (c *Client) EachMessage(ctx context.Context, perPage time.Duration, req *castv1.ListMessagesRequest, fn func(*castv1.Message) error) error {
	r := proto.Clone(req).(*castv1.ListMessagesRequest)
	last := int64(0) // the newest seq handed to fn
	for {
		resp, err := c.page(ctx, perPage, r)
		if err != nil && r.PageToken != "" && last > 0 && ReasonOf(err) == "INVALID_PAGE_TOKEN" {
			// A compaction (hourly, or NOSPACE recovery) passed the
			// token's revision. Stored messages never change, so the
			// rest of the range reads the same from a fresh first page.
			r.PageToken, r.StartSeq = "", last+1
			resp, err = c.page(ctx, perPage, r)
		}
		if err != nil {
			return err
		}
		for _, m := range resp.Messages {
			if err := fn(m); err != nil {
				return err
			}
			last = m.Seq
		}
		if resp.NextPageToken == "" {
			return nil
		}
		if len(resp.Messages) == 0 {
			return fmt.Errorf("session %s: an empty page with a page token", req.SessionId)
		}
		r.PageToken = resp.NextPageToken
	}
}

func (c *Client) page(ctx context.Context, timeout time.Duration, req *castv1.ListMessagesRequest) (*castv1.ListMessagesResponse, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return c.Sessions.ListMessages(ctx, req)
}
