package controlplane

import (
	"context"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/version"
)

type versionService struct {
	castv1.UnimplementedVersionServiceServer
	s *Server
}

func (v *versionService) GetVersion(context.Context, *castv1.GetVersionRequest) (*castv1.GetVersionResponse, error) {
	in := version.Get()
	return &castv1.GetVersionResponse{
		Version: in.Version, Revision: in.Revision, BuildTime: in.BuildTime, Modified: in.Modified,
		GoVersion: in.GoVersion, Platform: in.Platform,
		CapabilityVersion: CapabilityVersion, Replica: v.s.cfg.ReplicaID,
	}, nil
}
