package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/cast-dev/cast/internal/testharness"
)

// Every binary reports the version and revision the build linked in (the
// harness links them as the Makefile does); `cast version` shows the
// client's and the control plane's builds and warns when they may differ
// (the in-process control plane here is a test build: "dev", no version to
// compare; version.TestSkew has the rule).
func TestVersions(t *testing.T) {
	t.Parallel()
	bin := testharness.Binaries(t)
	for _, b := range []string{"controlplane", "node"} {
		out, errOut, code := testharness.Run(t, nil, filepath.Join(bin, b), "--version")
		if code != 0 || !strings.HasPrefix(out, b+" "+testharness.BuildVersion+" ("+testharness.BuildRevision[:12]) {
			t.Errorf("%s --version: exit %d, %q %q", b, code, out, errOut)
		}
	}
	srv := testharness.StartControlPlane(t, nil)
	out, errOut, code := testharness.Run(t, nil, filepath.Join(bin, "cast"), "--addr", srv.Addr(), "version", "--json")
	if code != 0 {
		t.Fatalf("cast version: exit %d: %s", code, errOut)
	}
	var rep struct {
		Client struct{ Version, Revision string }
		Server *struct {
			Version   string
			GoVersion string `json:"go_version"`
		}
		ServerReplica     string `json:"server_replica"`
		CapabilityVersion int    `json:"capability_version"`
		Skew              string
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("cast version --json: %v\n%s", err, out)
	}
	if rep.Client.Version != testharness.BuildVersion || rep.Client.Revision != testharness.BuildRevision {
		t.Errorf("client build %+v, want %s %s", rep.Client, testharness.BuildVersion, testharness.BuildRevision)
	}
	if rep.Server == nil || rep.Server.Version != "dev" || rep.Server.GoVersion == "" || rep.ServerReplica == "" || rep.CapabilityVersion == 0 {
		t.Errorf("server build %+v replica %q capability %d", rep.Server, rep.ServerReplica, rep.CapabilityVersion)
	}
	if rep.Skew == "" || !strings.Contains(errOut, "warning: client "+testharness.BuildVersion+" and control plane dev may differ") {
		t.Errorf("no skew warning: skew %q, stderr %q", rep.Skew, errOut)
	}
	// --client needs no control plane.
	out, errOut, code = testharness.Run(t, nil, filepath.Join(bin, "cast"), "--addr", "127.0.0.1:1", "version", "--client")
	if code != 0 || !strings.HasPrefix(out, "client: "+testharness.BuildVersion) {
		t.Errorf("cast version --client: exit %d, %q %q", code, out, errOut)
	}
}

// grpcurl's view: reflection lists every service the control plane serves,
// without a credential, and health answers SERVING for each of them.
func TestReflectionAndHealthPerService(t *testing.T) {
	t.Parallel()
	srv := testharness.StartControlPlane(t, nil)
	conn, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("reflection list: %v", err)
	}
	var listed []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		listed = append(listed, s.GetName())
	}
	_ = stream.CloseSend()
	for _, want := range []string{"cast.v1.SessionService", "cast.v1.NodeService", "cast.v1.MigrationService",
		"cast.v1.AccountService", "cast.v1.AuthService", "cast.v1.VersionService", "cast.v1.AgentService", "grpc.health.v1.Health"} {
		if !slices.Contains(listed, want) {
			t.Errorf("reflection lists %v, missing %s", listed, want)
		}
	}
	hc := healthpb.NewHealthClient(conn)
	for _, svc := range append(listed, "") {
		testharness.WaitFor(t, 20*time.Second, "health of "+svc, func() bool {
			r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
			return err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING
		})
	}
}
