package store

// SetAfterChunks runs fn in every append after its chunks are written and
// before it is committed, so a test can change the world in between.
func SetAfterChunks(s *Store, fn func()) { s.afterChunks = fn }
