package controlplane

import (
	"context"
	"errors"
	"sync"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the "proto" codec wrapped here
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/wire"
)

// A request that does not decode (a string field that is not valid UTF-8,
// or bytes that are no protobuf message at all) fails protobuf's
// unmarshal, and grpc-go answers any codec error with INTERNAL ("failed to
// unmarshal"), without an ErrorInfo, before an interceptor runs. It is the
// client's mistake, so requestCodec lets such a message through
// half-decoded and notes why, and the first interceptor refuses it with
// INVALID_ARGUMENT (naming the field where it can); no handler ever sees
// it.
type requestCodec struct {
	inner encoding.CodecV2
	bad   sync.Map // request message (pointer) -> *errs.Error
}

func newRequestCodec() *requestCodec {
	return &requestCodec{inner: encoding.GetCodecV2("proto")}
}

func (c *requestCodec) Name() string { return c.inner.Name() }

func (c *requestCodec) Marshal(v any) (mem.BufferSlice, error) { return c.inner.Marshal(v) }

func (c *requestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.inner.Unmarshal(data, v)
	m, isMsg := v.(proto.Message)
	if err == nil || !isMsg {
		return err
	}
	desc := m.ProtoReflect().Descriptor()
	var u interface{ InvalidUTF8() bool }
	if !errors.As(err, &u) || !u.InvalidUTF8() {
		c.bad.Store(v, errs.Invalid("the request is not a valid %s message (%v); send it as protobuf encodes it", desc.FullName(), err))
		return nil
	}
	field := wire.InvalidUTF8Field(data.Materialize(), desc)
	if field == "" {
		field = "a string field"
	}
	c.bad.Store(v, errs.Invalid("%s is not valid UTF-8: protobuf strings must be UTF-8 text", field).With("field", field))
	return nil
}

// refused returns the refusal of a request the codec noted, forgetting it.
func (c *requestCodec) refused(req any) error {
	e, ok := c.bad.LoadAndDelete(req)
	if !ok {
		return nil
	}
	return toStatus(zap.NewNop(), e.(*errs.Error))
}

func (c *requestCodec) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := c.refused(req); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (c *requestCodec) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, requestStream{ServerStream: ss, c: c})
}

// requestStream refuses each streamed request the codec noted.
type requestStream struct {
	grpc.ServerStream
	c *requestCodec
}

func (s requestStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return s.c.refused(m)
}
