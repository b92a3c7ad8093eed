// Package objstore is the object store that history beyond etcd lives in
// (store's tiering): a local folder (--object-store-dir; --dev uses
// DATA_DIR/objects) or any service speaking the S3 API. Both give the same
// small surface: whole objects put, got, listed and deleted by key. Callers
// declare the interface they use (store.Objects); this package implements
// it (Bucket, what Open returns, has only the same four methods).
package objstore

import "errors"

// ErrNotFound is returned by Get for a key the store does not hold.
var ErrNotFound = errors.New("objstore: object not found")
