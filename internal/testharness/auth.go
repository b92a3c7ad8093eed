package testharness

import (
	"sync"

	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/controlplane"
)

// Every control plane a test starts has auth on, as a real one does. The
// harness gives all of them one admin token, made once per test binary:
// control planes take it as their first admin token
// (CAST_BOOTSTRAP_TOKEN), the cast CLI and Dial present it (CAST_TOKEN),
// and nodes enroll with it on first start (CAST_JOIN_TOKEN; an admin token
// may enroll a node), getting their own credentials; control planes serve
// plaintext on loopback (CAST_INSECURE). Tests about auth override these
// per call.

// AdminToken is the admin token of every control plane the harness starts.
var AdminToken = sync.OnceValue(func() string {
	tok, err := authz.NewToken()
	if err != nil {
		panic(err)
	}
	return tok
})

// AuthEnv is the environment that gives a process the harness's
// credentials.
func AuthEnv() []string {
	return []string{controlplane.BootstrapTokenEnv + "=" + AdminToken(), "CAST_TOKEN=" + AdminToken(), "CAST_JOIN_TOKEN=" + AdminToken(),
		"CAST_INSECURE=1"} // control planes serve plaintext on loopback
}
