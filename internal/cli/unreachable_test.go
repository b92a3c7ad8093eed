package cli

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
)

// An address nothing answers at is told to start `controlplane --dev` only
// when it is on this machine: a remote one cannot be started from here, so
// the message names the address and where it came from (the context, --addr,
// CAST_ADDR or the default) instead.
func TestUnreachableNamesWhereTheAddressCameFrom(t *testing.T) {
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	t.Setenv("CAST_ADDR", "")
	path := client.ConfigPath(func(k string) string { return map[string]string{"XDG_CONFIG_HOME": cfg}[k] })
	if err := client.SetContext(path, "prod", client.Context{Addr: "10.9.8.7:7777", Insecure: true}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, context, addr, env string
		want                     string
	}{
		{"context", "prod", "", "", `cannot reach the control plane at 10.9.8.7:7777 (context "prod"): check that it runs and that this machine can reach it, or choose another with --context / --addr / CAST_ADDR`},
		{"--addr", "prod", "cp.example.com:7777", "", `cannot reach the control plane at cp.example.com:7777 (--addr): check that it runs and that this machine can reach it, or choose another with --context / --addr / CAST_ADDR`},
		{"CAST_ADDR", "prod", "", "10.1.1.1:7777", `cannot reach the control plane at 10.1.1.1:7777 (CAST_ADDR): check that it runs and that this machine can reach it, or choose another with --context / --addr / CAST_ADDR`},
		{"loopback", "prod", "127.0.0.1:1", "", "cannot reach the control plane at 127.0.0.1:1; start it with `controlplane --dev`, or point --addr / CAST_ADDR at it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CAST_ADDR", tc.env)
			a := &app{context: tc.context, addr: tc.addr}
			if _, err := a.client(); err != nil {
				t.Fatal(err)
			}
			defer a.cli.Close()
			if got := a.explain(status.Error(codes.Unavailable, "connection refused")); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
