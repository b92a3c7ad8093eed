package controlplane_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// rawCodec sends the bytes it holds whatever the request, so a test can put
// on the wire what no Go protobuf client would marshal; answers decode as
// usual.
type rawCodec struct{ req []byte }

func (rawCodec) Name() string { return "proto" }

func (c rawCodec) Marshal(any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(c.req)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return encoding.GetCodecV2("proto").Unmarshal(data, v)
}

func str(b []byte, num protowire.Number, s string) []byte {
	return protowire.AppendString(protowire.AppendTag(b, num, protowire.BytesType), s)
}

func sub(b []byte, num protowire.Number, m []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(b, num, protowire.BytesType), m)
}

// A string field that is not UTF-8 is the client's mistake: INVALID_ARGUMENT
// naming the field, for unary and streaming calls alike, where grpc-go's
// codec answered INTERNAL "failed to unmarshal" before any handler ran.
func TestInvalidUTF8IsInvalidArgument(t *testing.T) {
	t.Parallel()
	srv := testharness.StartControlPlane(t, nil)
	c := testharness.Dial(t, srv.Addr())
	ctx := ctxT(t)
	bad := "ti\xfftle"

	okMsg := str(protowire.AppendVarint(protowire.AppendTag(str(nil, 2, "c1"), 3, protowire.VarintType), 1), 4, "fine")
	badMsg := str(protowire.AppendVarint(protowire.AppendTag(str(nil, 2, "c2"), 3, protowire.VarintType), 1), 4, bad)
	cases := []struct {
		name  string
		call  func(opt grpc.CallOption) error
		req   []byte
		field string
	}{
		{"create title", func(o grpc.CallOption) error {
			_, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{}, o)
			return err
		}, str(str(nil, 1, "claude"), 7, bad), "title"},
		{"second message's text", func(o grpc.CallOption) error {
			_, err := c.Sessions.AppendMessages(ctx, &castv1.AppendMessagesRequest{}, o)
			return err
		}, sub(sub(str(nil, 1, "s1"), 2, okMsg), 2, badMsg), "messages[1].text"},
		{"watch (a stream)", func(o grpc.CallOption) error {
			w, err := c.Sessions.WatchSession(ctx, &castv1.WatchSessionRequest{}, o)
			if err != nil {
				return err
			}
			_, err = w.Recv()
			return err
		}, str(nil, 1, bad), "session_id"},
	}
	for _, tc := range cases {
		err := tc.call(grpc.ForceCodecV2(rawCodec{req: tc.req}))
		wantRefusal(t, tc.name, err, tc.field)
		if err != nil && !strings.Contains(err.Error(), tc.field+" is not valid UTF-8") {
			t.Errorf("%s: %v does not say which field is not UTF-8", tc.name, err)
		}
	}
	// The codec still serves well-formed calls.
	if _, err := c.Sessions.ListSessions(ctx, &castv1.ListSessionsRequest{}); err != nil {
		t.Errorf("a well-formed call after the refusals: %v", err)
	}
}

// Bytes that are not a protobuf message at all (a truncated field, a
// field of the wrong wire type, a bad tag) are the client's mistake too:
// INVALID_ARGUMENT with its reason, naming the message, for unary and
// streaming calls, a unary one before the caller's credential is looked at
// (a stream's messages are read after it). The codec answered them
// INTERNAL "failed to unmarshal" without an ErrorInfo.
func TestMalformedRequestIsInvalidArgument(t *testing.T) {
	t.Parallel()
	srv := testharness.StartControlPlane(t, nil)
	ctx := ctxT(t)
	for who, c := range map[string]*client.Client{"admin": testharness.Dial(t, srv.Addr()), "nobody": testharness.DialAs(t, srv.Addr(), "")} {
		for _, tc := range []struct {
			name, msg string
			req       []byte
			call      func(opt grpc.CallOption) error
		}{
			{"truncated string (unary)", "cast.v1.GetSessionRequest", []byte{0x0a, 0x10, 'a'}, func(o grpc.CallOption) error {
				_, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{}, o)
				return err
			}},
			{"a varint of 11 bytes (unary)", "cast.v1.ListSessionsRequest", []byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, func(o grpc.CallOption) error {
				_, err := c.Sessions.ListSessions(ctx, &castv1.ListSessionsRequest{}, o)
				return err
			}},
			{"field number 0 (a stream)", "cast.v1.WatchSessionRequest", []byte{0x00, 0x01}, func(o grpc.CallOption) error {
				w, err := c.Sessions.WatchSession(ctx, &castv1.WatchSessionRequest{}, o)
				if err != nil {
					return err
				}
				_, err = w.Recv()
				return err
			}},
		} {
			err := tc.call(grpc.ForceCodecV2(rawCodec{req: tc.req}))
			if who == "nobody" && strings.Contains(tc.name, "stream") {
				wantDenied(t, who+" "+tc.name, err, codes.Unauthenticated, errs.ReasonUnauthenticated)
				continue
			}
			st, _ := status.FromError(err)
			if st.Code() != codes.InvalidArgument || client.ReasonOf(err) != errs.ReasonInvalidArgument || !strings.Contains(st.Message(), tc.msg) {
				t.Errorf("%s %s: got %v (reason %q), want INVALID_ARGUMENT %s naming %s", who, tc.name, err, client.ReasonOf(err), errs.ReasonInvalidArgument, tc.msg)
			}
		}
	}
}
