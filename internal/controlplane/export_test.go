package controlplane

import (
	"google.golang.org/grpc"

	"github.com/cast-dev/cast/internal/authz"
)

// Policy is the server's authorization table, for tests.
func (s *Server) Policy() authz.Policy { return s.policy }

// ServiceInfo is what the gRPC server serves, for tests.
func (s *Server) ServiceInfo() map[string]grpc.ServiceInfo { return s.grpc.GetServiceInfo() }
