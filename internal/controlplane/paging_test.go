package controlplane_test

import (
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/testharness"
)

// The control plane refuses page and message sizes whose replies could
// pass the clients' receive limit.
func TestConfigKeepsRepliesUnderTheReceiveLimit(t *testing.T) {
	for _, tc := range []struct {
		name      string
		page, msg int
		ok        bool
	}{
		{"defaults", 0, 0, true},
		{"pages of 32 MiB", 32 << 20, 0, true},
		{"pages of the limit", client.MaxReplyBytes, 0, false},
		{"messages of the limit", 0, client.MaxReplyBytes, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testharness.ControlPlaneConfig(t)
			if tc.page > 0 {
				cfg.Store.PageBytes = tc.page
			}
			if tc.msg > 0 {
				cfg.Store.MaxMessageBytes, cfg.MaxRecvBytes = tc.msg, tc.msg
			}
			err := cfg.Validate()
			if tc.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "receive limit")) {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}
