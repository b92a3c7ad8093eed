package controlplane

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/secrets"
)

// Node calls need the node token when the control plane has one: a node
// can append to sessions it owns, report turns and fetch fleet
// credentials, so no other API client may speak for it. ListNodes and
// DeleteNode are what `cast nodes` and `cast node rm` call and stay open.

const nodeServicePrefix = "/cast.v1.NodeService/"

// ReasonNodeToken is the ErrorInfo reason of a refused node call.
const ReasonNodeToken = "NODE_TOKEN_INVALID"

func needsNodeToken(method string) bool {
	return strings.HasPrefix(method, nodeServicePrefix) && method != nodeServicePrefix+"ListNodes" &&
		method != nodeServicePrefix+"DeleteNode"
}

func (s *Server) checkNodeToken(ctx context.Context, method string) error {
	if s.nodeToken == "" || !needsNodeToken(method) {
		return nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if got := md.Get(client.NodeTokenHeader); len(got) == 1 && secrets.TokenEqual(got[0], s.nodeToken) {
		return nil
	}
	return withInfo(codes.Unauthenticated, "this control plane needs the node token; start the node with --token-file (the same token as the control plane's --node-token-file)", ReasonNodeToken, nil)
}

func (s *Server) unaryNodeAuth(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := s.checkNodeToken(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

func (s *Server) streamNodeAuth(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := s.checkNodeToken(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return h(srv, ss)
}
