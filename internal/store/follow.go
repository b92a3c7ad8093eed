package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/metadata"

	"github.com/cast-dev/cast/internal/retry"
	"github.com/cast-dev/cast/internal/tick"
)

// Every etcd watch of the store goes through follow, because a clientv3
// watch can end while nothing is wrong with etcd. clientv3 multiplexes all
// watches whose contexts carry the same outgoing gRPC metadata over one
// gRPC stream, and authenticates that stream once, when it opens (its
// stream interceptor fetches a new token then). etcd checks that token at
// each watch created on the stream, and forgets a simple token that went
// unused for --auth-token-ttl (5 minutes by default); unary calls use the
// client's newer tokens, so once no watch was created on a long-lived
// stream for that long, etcd cancels every new watch on it ("invalid auth
// token") while the older ones run on. The stream stays up, so clientv3
// never re-opens it, and every later Watch lands on it again: each
// WatchSession ended at once until the process restarted. follow re-opens
// a canceled watch from the revision after the last one it delivered, on a
// new stream (a new generation in the metadata picks one), which
// authenticates afresh.

// watchStreamMD is the outgoing metadata key whose value (a generation)
// picks clientv3's watch stream.
const watchStreamMD = "cast-watch-stream"

// watchStable: a watch that stayed open this long (or delivered an event)
// was working; its end starts a new budget.
const watchStable = 5 * time.Second

// newWatchBudget paces the re-opens of one watch: at once after one that
// worked, then by retry.EtcdWatch.
func newWatchBudget() retry.Budget {
	return retry.Budget{Policy: retry.EtcdWatch}
}

// watchBatch is one delivery of follow: events in revision order, or (the
// last one) why the watch ended.
type watchBatch struct {
	Events []*clientv3.Event
	Err    error
}

// errWatchRefused: etcd refused a watch for a reason a new stream does not
// change (its user may not read the range).
var errWatchRefused = errors.New("etcd refused the watch")

// follow watches key (opts as clientv3.Watch's, without WithRev) from
// revision rev (0: from now) until ctx ends, and keeps the watch open when
// etcd cancels it, re-opening from the revision after the last event
// delivered. It ends with one batch carrying an error when the history
// from that revision was compacted (rpctypes.ErrCompacted), when etcd
// refuses the range (errWatchRefused), or when re-opening kept failing
// for its budget. The caller cancels ctx to stop it.
func (s *Store) follow(ctx context.Context, key string, rev int64, opts ...clientv3.OpOption) <-chan watchBatch {
	out := make(chan watchBatch)
	go func() {
		defer close(out)
		if err := s.followLoop(ctx, out, key, rev, opts); err != nil && ctx.Err() == nil {
			select {
			case out <- watchBatch{Err: err}:
			case <-ctx.Done():
			}
		}
	}()
	return out
}

func (s *Store) followLoop(ctx context.Context, out chan<- watchBatch, key string, next int64, opts []clientv3.OpOption) error {
	b := newWatchBudget()
	for {
		gen := s.watchGen.Load()
		opened := time.Now()
		delivered, err := s.followOnce(ctx, out, key, &next, gen, opts)
		if ctx.Err() != nil {
			return nil
		}
		switch {
		case errors.Is(err, rpctypes.ErrCompacted):
			return err
		case strings.Contains(err.Error(), rpctypes.ErrPermissionDenied.Error()):
			return fmt.Errorf("%w: etcd's permissions deny the control plane's user reading %s", errWatchRefused, key)
		case s.cli.Ctx().Err() != nil:
			return fmt.Errorf("etcd client closed: %w", err)
		}
		s.watchGen.CompareAndSwap(gen, gen+1) // the next watch opens a new stream
		pause, ok := b.Ended(time.Now(), delivered || time.Since(opened) >= watchStable)
		if !ok {
			return fmt.Errorf("etcd watch of %s kept failing for %s: %w", key, b.Limit, err)
		}
		s.lg.Info("etcd canceled a watch; re-opening it on a new stream", zap.String("key", key),
			zap.Int64("from_revision", next), zap.Duration("after", pause), zap.Error(err))
		if !tick.Sleep(ctx, pause) {
			return nil
		}
	}
}

// followOnce runs one clientv3 watch on stream generation gen, forwarding
// its events to out and moving *next past them, until it ends; it returns
// whether it delivered anything and why it ended.
func (s *Store) followOnce(ctx context.Context, out chan<- watchBatch, key string, next *int64, gen int64, opts []clientv3.OpOption) (bool, error) {
	wctx, cancel := context.WithCancel(watchStreamContext(ctx, gen))
	defer cancel()
	opts = append(opts[:len(opts):len(opts)], clientv3.WithRev(*next), clientv3.WithCreatedNotify(), clientv3.WithProgressNotify())
	delivered := false
	for wr := range s.cli.Watch(wctx, key, opts...) {
		if err := wr.Err(); err != nil {
			return delivered, err
		}
		switch {
		case wr.Created:
			if *next == 0 { // from now: etcd starts after the revision it reports
				*next = wr.Header.Revision + 1
			}
		case len(wr.Events) > 0:
			// A revision's events never span two responses (without
			// WithFragment), so the next one starts after the last here.
			*next = wr.Events[len(wr.Events)-1].Kv.ModRevision + 1
			delivered = true
			select {
			case out <- watchBatch{Events: wr.Events}:
			case <-ctx.Done():
				return delivered, ctx.Err()
			}
		case wr.IsProgressNotify():
			// Everything up to the header's revision was sent: an idle
			// watch resumes above history a compaction may have dropped.
			*next = max(*next, wr.Header.Revision+1)
		}
	}
	return delivered, errors.New("the watch closed without a reason")
}

// watchStreamContext is ctx requiring a leader (a member cut off from the
// cluster cancels the watch rather than stall it), on stream generation
// gen.
func watchStreamContext(ctx context.Context, gen int64) context.Context {
	ctx = clientv3.WithRequireLeader(ctx)
	md, _ := metadata.FromOutgoingContext(ctx)
	md = md.Copy()
	md.Set(watchStreamMD, strconv.FormatInt(gen, 10))
	return metadata.NewOutgoingContext(ctx, md)
}
