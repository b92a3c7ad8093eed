package client

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// flaky is a real NodeService on loopback that answers UNAVAILABLE to the
// first calls of each method.
type flaky struct {
	castv1.UnimplementedNodeServiceServer
	failFirst int32
	calls     atomic.Int32
}

func (f *flaky) answer() error {
	if f.calls.Add(1) <= f.failFirst {
		return status.Error(codes.Unavailable, "not yet")
	}
	return nil
}

func (f *flaky) ReportWorkspace(context.Context, *castv1.ReportWorkspaceRequest) (*castv1.ReportWorkspaceResponse, error) {
	return &castv1.ReportWorkspaceResponse{}, f.answer()
}

func (f *flaky) ReportWorkTree(context.Context, *castv1.ReportWorkTreeRequest) (*castv1.ReportWorkTreeResponse, error) {
	return &castv1.ReportWorkTreeResponse{}, f.answer()
}

func (f *flaky) ReportTurn(context.Context, *castv1.ReportTurnRequest) (*castv1.ReportTurnResponse, error) {
	return &castv1.ReportTurnResponse{}, f.answer()
}

func reportWorkTree(ctx context.Context, c castv1.NodeServiceClient) error {
	_, err := c.ReportWorkTree(ctx, &castv1.ReportWorkTreeRequest{})
	return err
}

// The service config's retry policy: a node's answers are retried by gRPC
// through UNAVAILABLE, up to 5 attempts; other calls are not.
func TestServiceConfigRetriesNodeAnswers(t *testing.T) {
	for _, tc := range []struct {
		name      string
		failFirst int32
		call      func(context.Context, castv1.NodeServiceClient) error
		wantCode  codes.Code
		wantCalls int32
	}{
		{"a workspace answer rides out 4 refusals", 4, func(ctx context.Context, c castv1.NodeServiceClient) error {
			_, err := c.ReportWorkspace(ctx, &castv1.ReportWorkspaceRequest{})
			return err
		}, codes.OK, 5},
		{"a work tree report rides out 2", 2, reportWorkTree, codes.OK, 3},
		{"5 attempts, then its error", 9, reportWorkTree, codes.Unavailable, 5},
		{"another call is not retried", 1, func(ctx context.Context, c castv1.NodeServiceClient) error {
			_, err := c.ReportTurn(ctx, &castv1.ReportTurnRequest{})
			return err
		}, codes.Unavailable, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			f := &flaky{failFirst: tc.failFirst}
			srv := grpc.NewServer()
			castv1.RegisterNodeServiceServer(srv, f)
			go func() { _ = srv.Serve(l) }()
			t.Cleanup(srv.Stop)
			c, err := Dial(l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := tc.call(ctx, c.Nodes); status.Code(err) != tc.wantCode || f.calls.Load() != tc.wantCalls {
				t.Fatalf("got %v after %d calls, want %v after %d", err, f.calls.Load(), tc.wantCode, tc.wantCalls)
			}
		})
	}
}
