package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/nodebin"
)

// nodeBinary is cast's node binary, which does on this machine what needs
// the node's runner (what, for the error: `cast agents check`'s canary,
// `cast exec --dry-run`'s command line), so the CLI links no runner. Under
// `go run` it is built into the user's cache folder.
func (a *app) nodeBinary(ctx context.Context, what string) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	bin, err := nodebin.Find(ctx, "", filepath.Join(cache, "cast", "bin"), zap.NewNop())
	if errors.Is(err, nodebin.ErrNotFound) {
		return "", fmt.Errorf("%s runs on cast's node binary, and there is %w: put cast's node beside cast or on PATH (go build -o bin/ ./cmd/... and make build build both)", what, err)
	}
	return bin, err
}
