package store

import (
	"context"
	"sync"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Heartbeats renew node leases on one LeaseKeepAlive stream a replica
// shares, not a stream each: clientv3's KeepAliveOnce opens and closes a
// gRPC stream per call (its HEADERS frames both ways, a goroutine on
// either side), which at thousands of heartbeats a second was the
// largest part of a heartbeat's cost on the control plane and on etcd.
// etcd answers each request on the stream with the lease's TTL (0: the
// lease is gone), in order, so answers go to the waiters of their lease
// oldest first. A stream that fails fails its waiters (each heartbeat
// reports the error, as KeepAliveOnce's did) and the next renewal opens
// another.
type keepAlives struct {
	cli    *clientv3.Client
	sendMu sync.Mutex // Send is not safe for concurrent use

	mu      sync.Mutex
	stream  etcdserverpb.Lease_LeaseKeepAliveClient // nil: none open
	waiting map[int64][]chan keepAliveAnswer        // lease -> waiters, oldest first
}

type keepAliveAnswer struct {
	ttl int64
	err error
}

func newKeepAlives(cli *clientv3.Client) *keepAlives {
	return &keepAlives{cli: cli, waiting: map[int64][]chan keepAliveAnswer{}}
}

// renew renews lease id once: ErrLeaseExpired when etcd no longer has it.
func (k *keepAlives) renew(ctx context.Context, id int64) error {
	ch := make(chan keepAliveAnswer, 1)
	stream, err := k.wait(id, ch)
	if err != nil {
		return err
	}
	k.sendMu.Lock()
	err = stream.Send(&etcdserverpb.LeaseKeepAliveRequest{ID: id})
	k.sendMu.Unlock()
	if err != nil {
		k.fail(stream, err)
	}
	select {
	case a := <-ch:
		if a.err != nil {
			return a.err
		}
		if a.ttl <= 0 {
			return ErrLeaseExpired
		}
		return nil
	case <-ctx.Done():
		k.forget(id, ch)
		return ctx.Err()
	}
}

// wait queues ch for id's next answer, opening the stream if none is open.
func (k *keepAlives) wait(id int64, ch chan keepAliveAnswer) (etcdserverpb.Lease_LeaseKeepAliveClient, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stream == nil {
		// The client's context, not a call's: the stream outlives every
		// heartbeat and ends when the client closes.
		s, err := etcdserverpb.NewLeaseClient(k.cli.ActiveConnection()).LeaseKeepAlive(k.cli.Ctx())
		if err != nil {
			return nil, err
		}
		k.stream = s
		go k.receive(s)
	}
	k.waiting[id] = append(k.waiting[id], ch)
	return k.stream, nil
}

// receive hands each answer on stream to its lease's oldest waiter.
func (k *keepAlives) receive(stream etcdserverpb.Lease_LeaseKeepAliveClient) {
	for {
		resp, err := stream.Recv()
		if err != nil {
			k.fail(stream, err)
			return
		}
		k.mu.Lock()
		if q := k.waiting[resp.ID]; len(q) > 0 {
			q[0] <- keepAliveAnswer{ttl: resp.TTL}
			k.pop(resp.ID, q)
		}
		k.mu.Unlock()
	}
}

// fail answers every waiter with err and drops stream, unless a newer
// stream already replaced it.
func (k *keepAlives) fail(stream etcdserverpb.Lease_LeaseKeepAliveClient, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stream != stream {
		return
	}
	k.stream = nil
	_ = stream.CloseSend()
	for id, q := range k.waiting {
		for _, ch := range q {
			ch <- keepAliveAnswer{err: err}
		}
		delete(k.waiting, id)
	}
}

// forget drops ch, whose caller stopped waiting; its answer, if one
// comes, goes to the next waiter of id, which asked for the same renewal.
func (k *keepAlives) forget(id int64, ch chan keepAliveAnswer) {
	k.mu.Lock()
	defer k.mu.Unlock()
	q := k.waiting[id]
	for i, c := range q {
		if c == ch {
			k.waiting[id] = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if len(k.waiting[id]) == 0 {
		delete(k.waiting, id)
	}
}

// pop removes q's first waiter of id.
func (k *keepAlives) pop(id int64, q []chan keepAliveAnswer) {
	if len(q) == 1 {
		delete(k.waiting, id)
		return
	}
	k.waiting[id] = q[1:]
}
