package node

import (
	"context"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// ExportWorkTree runs c to its end as the node does a relayed (or
// resent) export command, for tests.
func (a *Daemon) ExportWorkTree(ctx context.Context, c *castv1.ExportWorkTree) {
	a.exportWorkTree(ctx, c)
}

// UserTexts are the user text items of a model request, for tests.
var UserTexts = userTexts
