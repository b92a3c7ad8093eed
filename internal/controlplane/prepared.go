package controlplane

import (
	"google.golang.org/grpc"

	"github.com/cast-dev/cast/internal/fanout"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/store"
)

// One append reaches every WatchSession stream of its session: encoding
// it once (a grpc.PreparedMsg, shared through the fan-out's memo) rather
// than once a stream is most of the send's cost at thousands of streams.
// A prepared message carries its compression, so it is shared only
// between streams that compress alike.

// watchResponse is ev on the wire.
func watchResponse(ev store.Event) *castv1.WatchSessionResponse {
	if ev.Message != nil {
		return &castv1.WatchSessionResponse{Event: &castv1.WatchSessionResponse_Message{Message: ev.Message}}
	}
	return &castv1.WatchSessionResponse{Event: &castv1.WatchSessionResponse_Session{Session: ev.Session}}
}

// prepare encodes m for stream (and any stream that compresses alike).
func prepare(stream grpc.ServerStream, m any) (*grpc.PreparedMsg, error) {
	p := &grpc.PreparedMsg{}
	if err := p.Encode(stream, m); err != nil {
		return nil, err
	}
	return p, nil
}

// sendPrepared sends ev on stream, encoded once for every stream whose
// compression is the same (or for this one alone when it cannot tell).
func sendPrepared(stream grpc.ServerStream, ev fanout.Event) error {
	memo := ev.Memo
	s, ok := grpc.ServerTransportStreamFromContext(stream.Context()).(interface{ SendCompress() string })
	if !ok {
		memo = nil
	}
	key := ""
	if s != nil {
		key = s.SendCompress()
	}
	msg, err := memo.Get(key, func() (any, error) { return prepare(stream, watchResponse(ev.Event)) })
	if err != nil {
		return err
	}
	return stream.SendMsg(msg)
}
