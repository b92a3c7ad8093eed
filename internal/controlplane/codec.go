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

// A request whose string field is not valid UTF-8 fails protobuf's
// unmarshal, and grpc-go answers any codec error with INTERNAL ("failed to
// unmarshal") before an interceptor runs. It is the client's mistake, so
// utf8Codec lets such a message through half-decoded and notes it, and the
// first interceptor refuses it with INVALID_ARGUMENT naming the field; no
// handler ever sees it.
type utf8Codec struct {
	inner encoding.CodecV2
	bad   sync.Map // request message (pointer) -> field path
}

func newUTF8Codec() *utf8Codec {
	return &utf8Codec{inner: encoding.GetCodecV2("proto")}
}

func (c *utf8Codec) Name() string { return c.inner.Name() }

func (c *utf8Codec) Marshal(v any) (mem.BufferSlice, error) { return c.inner.Marshal(v) }

func (c *utf8Codec) Unmarshal(data mem.BufferSlice, v any) error {
	err := c.inner.Unmarshal(data, v)
	var u interface{ InvalidUTF8() bool }
	m, isMsg := v.(proto.Message)
	if err == nil || !isMsg || !errors.As(err, &u) || !u.InvalidUTF8() {
		return err
	}
	field := wire.InvalidUTF8Field(data.Materialize(), m.ProtoReflect().Descriptor())
	if field == "" {
		field = "a string field"
	}
	c.bad.Store(v, field)
	return nil
}

// refused returns the refusal of a request the codec noted, forgetting it.
func (c *utf8Codec) refused(req any) error {
	field, ok := c.bad.LoadAndDelete(req)
	if !ok {
		return nil
	}
	return toStatus(zap.NewNop(), errs.Invalid("%s is not valid UTF-8: protobuf strings must be UTF-8 text", field).With("field", field.(string)))
}

func (c *utf8Codec) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := c.refused(req); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func (c *utf8Codec) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, utf8Stream{ServerStream: ss, c: c})
}

// utf8Stream refuses each streamed request the codec noted.
type utf8Stream struct {
	grpc.ServerStream
	c *utf8Codec
}

func (s utf8Stream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return s.c.refused(m)
}
