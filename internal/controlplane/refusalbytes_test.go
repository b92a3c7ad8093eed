package controlplane_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/testharness"
)

// Every method of the API, called as an admin with bytes that are no
// protobuf message, is refused with a reason: a unary call
// INVALID_ARGUMENT before anything else, a stream once its message is
// read (or earlier, with the reason of what refused it first).
func TestEveryMethodRefusesMalformedBytes(t *testing.T) {
	t.Parallel()
	conn := rawConn(t)
	bad := grpc.ForceCodecV2(rawCodec{req: []byte{0x00, 0x01}}) // field number 0
	calls := 0
	protoregistry.GlobalFiles.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if fd.Package() != "cast.v1" {
			return true
		}
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				md := sd.Methods().Get(j)
				method := "/" + string(sd.FullName()) + "/" + string(md.Name())
				ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctxT(t), "authorization", "Bearer "+testharness.AdminToken()), 20*time.Second)
				calls++
				if !md.IsStreamingClient() && !md.IsStreamingServer() {
					err := conn.Invoke(ctx, method, &emptypb.Empty{}, &emptypb.Empty{}, bad)
					wantDenied(t, method, err, codes.InvalidArgument, errs.ReasonInvalidArgument)
					cancel()
					continue
				}
				st, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: md.IsStreamingServer(), ClientStreams: md.IsStreamingClient()}, method, bad)
				if err == nil {
					if err = st.SendMsg(&emptypb.Empty{}); err == nil || errors.Is(err, io.EOF) {
						_ = st.CloseSend()
						err = st.RecvMsg(&emptypb.Empty{})
					}
				}
				cancel()
				if reason := client.ReasonOf(err); reason == "" || status.Code(err) == codes.InvalidArgument && reason != errs.ReasonInvalidArgument {
					t.Errorf("%s: %v (reason %q), want a refusal with a reason", method, err, reason)
				}
			}
		}
		return true
	})
	if calls < 40 {
		t.Fatalf("called only %d methods", calls)
	}
}
