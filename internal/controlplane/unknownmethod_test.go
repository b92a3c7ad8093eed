package controlplane_test

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/testharness"
)

// A call of a method or service the API does not have is UNIMPLEMENTED
// with its reason, as nobody and as an admin, unary or streaming (grpc-go
// answered it without an ErrorInfo); the web listener answers it alike
// (TestWebRefusalsCarryAReason).
func TestUnknownMethodHasAReason(t *testing.T) {
	t.Parallel()
	conn := rawConn(t)
	for who, token := range map[string]string{"nobody": "", "admin": testharness.AdminToken()} {
		ctx := ctxT(t)
		if token != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		}
		for _, method := range []string{"/cast.v1.SessionService/Nope", "/cast.v1.NopeService/Nope", "/nope/Nope"} {
			err := conn.Invoke(ctx, method, &emptypb.Empty{}, &emptypb.Empty{})
			wantDenied(t, who+" "+method, err, codes.Unimplemented, errs.ReasonUnknownMethod)
			st, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method)
			if err == nil {
				err = st.RecvMsg(&emptypb.Empty{})
			}
			wantDenied(t, who+" "+method+" (a stream)", err, codes.Unimplemented, errs.ReasonUnknownMethod)
		}
	}
}

// rawConn is a plain gRPC connection to a control plane of its own, for
// calls no generated client makes (unknown methods, undecodable bytes).
func rawConn(t *testing.T) *grpc.ClientConn {
	t.Helper()
	srv := testharness.StartControlPlane(t, nil)
	conn, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
