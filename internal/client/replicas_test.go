package client

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

func TestAddrs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"127.0.0.1:7777", []string{"127.0.0.1:7777"}},
		{"a:1, b:2,,c:3 ", []string{"a:1", "b:2", "c:3"}},
		{"", nil},
	} {
		if got := Addrs(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Addrs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestCheckPlaintextReplicaList(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:1,localhost:2", true},
		{"127.0.0.1:1,10.0.0.2:2", false}, // one replica off loopback is enough to refuse
		{",", false},
	} {
		if err := CheckPlaintext(tc.addr, nil, false); (err == nil) != tc.ok {
			t.Errorf("CheckPlaintext(%q) = %v, want ok %v", tc.addr, err, tc.ok)
		}
	}
	if _, err := Dial("127.0.0.1:1,no-port"); err == nil {
		t.Error("a list with an address without a port dialed")
	}
}

// replica is a real gRPC server on loopback that names itself.
type replica struct {
	castv1.UnimplementedVersionServiceServer
	name string
	srv  *grpc.Server
	addr string
}

func (r *replica) GetVersion(context.Context, *castv1.GetVersionRequest) (*castv1.GetVersionResponse, error) {
	return &castv1.GetVersionResponse{Replica: r.name}, nil
}

func startReplica(t *testing.T, name string) *replica {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{name: name, srv: grpc.NewServer(), addr: l.Addr().String()}
	castv1.RegisterVersionServiceServer(r.srv, r)
	go func() { _ = r.srv.Serve(l) }()
	t.Cleanup(r.srv.Stop)
	return r
}

// A client given a list of replicas uses the first that answers and moves
// down the list when it goes away; a dead first address is skipped.
func TestReplicaListFailsOver(t *testing.T) {
	a, b := startReplica(t, "a"), startReplica(t, "b")
	dead := func() string { l, _ := net.Listen("tcp", "127.0.0.1:0"); defer l.Close(); return l.Addr().String() }()
	c, err := Dial(dead + "," + a.addr + "," + b.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	serving := func() string {
		for range 100 { // bounded: a few seconds of redials
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			v, err := c.Version.GetVersion(ctx, &castv1.GetVersionRequest{})
			cancel()
			if err == nil {
				return v.Replica
			}
			time.Sleep(50 * time.Millisecond) // back-off between calls that failed
		}
		t.Fatal("no replica answered")
		return ""
	}
	if got := serving(); got != "a" {
		t.Fatalf("served by %q, want the first live replica a", got)
	}
	a.srv.Stop()
	if got := serving(); got != "b" {
		t.Fatalf("after a stopped, served by %q, want b", got)
	}
}
