package node

import (
	"strings"
	"testing"

	"go.uber.org/zap"
)

// A node never sends its credential in clear off this machine unless told
// to (--insecure); the refusal comes before anything is dialed.
func TestNodeRefusesPlaintextOffLoopback(t *testing.T) {
	for _, tc := range []struct {
		addr     string
		insecure bool
		ok       bool
	}{
		{"127.0.0.1:7777", false, true},
		{"192.0.2.1:7777", false, false},
		{"192.0.2.1:7777", true, true},
	} {
		cfg := DefaultConfig()
		cfg.ControlPlane, cfg.DataDir, cfg.Name, cfg.IsolatedHomes, cfg.Insecure = tc.addr, t.TempDir(), "n1", true, tc.insecure
		a, err := New(cfg, zap.NewNop())
		if (err == nil) != tc.ok || (err != nil && !strings.Contains(err.Error(), "in clear")) {
			t.Errorf("%s insecure=%v: %v, want ok=%v", tc.addr, tc.insecure, err, tc.ok)
		}
		if a != nil {
			a.cli.Close()
		}
	}
}
