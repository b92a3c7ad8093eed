package devmode

import "testing"

// The dev node's metrics sit beside the control plane's unless
// --node-metrics-listen says otherwise.
func TestNodeMetricsListen(t *testing.T) {
	for _, tc := range []struct{ cp, want string }{
		{"127.0.0.1:7778", "127.0.0.1:7779"},
		{"127.0.0.1:0", "127.0.0.1:0"}, // side by side: any free port
		{"[::1]:9000", "[::1]:9001"},
		{"", ""}, // the control plane's off: the node's too
		{"127.0.0.1:65535", "127.0.0.1:0"},
	} {
		if got := NodeMetricsListen(tc.cp); got != tc.want {
			t.Errorf("NodeMetricsListen(%q) = %q, want %q", tc.cp, got, tc.want)
		}
	}
}
