//go:build tools

// Package seaweedfs pins a real SeaweedFS (Apache-2.0) for the tier tests
// against an S3 server that is not gofakes3: `make test-s3` builds its
// `weed` binary from the Go module proxy and runs the store's tier tests
// against `weed server -s3` (CAST_S3_SERVER). It is a module of its own so
// cast's module graph stays as it is.
package seaweedfs

import _ "github.com/seaweedfs/seaweedfs/weed"
