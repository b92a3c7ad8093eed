package store

import (
	"context"
	"sync"
)

// readAhead is up to this many segments fetched and decoded ahead of an
// export (below segCacheSize, so they stay cached until read).
const readAhead = 2

// aheadReader fetches and decodes an export's next segments while the
// export decodes and sends the current one: the fetch, the digest check
// and the decompression overlap the page's work.
type aheadReader struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	tokens chan struct{} // one per segment it may be ahead
	refs   []segRef
	next   int // first of refs the export has not finished
}

// readAheadFrom starts reading ahead the session's segments from seq
// start at rev; stop ends it. nil when there is nothing to read ahead.
func (s *Store) readAheadFrom(ctx context.Context, sessionID string, start, rev int64) *aheadReader {
	if s.objs == nil {
		return nil
	}
	refs, _, err := s.segmentsFrom(ctx, sessionID, start, rev)
	if err != nil || len(refs) < 2 {
		return nil // the export's own reads report any error
	}
	ctx, cancel := context.WithCancel(ctx)
	a := &aheadReader{cancel: cancel, tokens: make(chan struct{}, readAhead), refs: refs}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		for _, r := range refs {
			select {
			case a.tokens <- struct{}{}:
			case <-ctx.Done():
				return
			}
			if _, err := s.segment(ctx, r); err != nil {
				return
			}
		}
	}()
	return a
}

// done tells it the export has read through seq last.
func (a *aheadReader) done(last int64) {
	if a == nil {
		return
	}
	for a.next < len(a.refs) && a.refs[a.next].last <= last {
		a.next++
		select {
		case <-a.tokens:
		default:
		}
	}
}

func (a *aheadReader) stop() {
	if a == nil {
		return
	}
	a.cancel()
	a.wg.Wait()
}
