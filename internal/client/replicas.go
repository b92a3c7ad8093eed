package client

import (
	"fmt"
	"net"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
)

// Several control plane replicas: an address may be a comma-separated
// list ("cp1:7777,cp2:7777,cp3:7777"). The connection uses gRPC's
// pick_first over the list in the order given: it dials the first replica
// that answers and, when that one goes away, the next call or stream dials
// down the list again (with the dial backoff), so a node or a client moves
// to a live replica by itself. One address is dialed as before.

// replicaScheme names the resolver of a list; never a real URL scheme.
const replicaScheme = "cast-replicas"

// Addrs splits a control plane address into its replicas' addresses.
func Addrs(addr string) []string {
	var out []string
	for _, a := range strings.Split(addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// connector returns what makes a new connection to addr with opts: one
// address is gRPC's own target; a list gets a fresh resolver per
// connection (a manual resolver serves one connection only).
func connector(addr string, opts []grpc.DialOption) (func() (*grpc.ClientConn, error), error) {
	addrs := Addrs(addr)
	if len(addrs) <= 1 {
		return func() (*grpc.ClientConn, error) { return grpc.NewClient(addr, opts...) }, nil
	}
	state := resolver.State{}
	for _, a := range addrs {
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			return nil, fmt.Errorf("control plane address %q: each replica is host:port: %w", a, err)
		}
		state.Addresses = append(state.Addresses, resolver.Address{Addr: a, ServerName: host})
	}
	return func() (*grpc.ClientConn, error) {
		r := manual.NewBuilderWithScheme(replicaScheme)
		r.InitialState(state)
		// pick_first (gRPC's default) tries the addresses in order.
		return grpc.NewClient(replicaScheme+":///"+addrs[0], append(opts[:len(opts):len(opts)], grpc.WithResolvers(r))...)
	}, nil
}
