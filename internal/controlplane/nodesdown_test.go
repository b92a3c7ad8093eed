package controlplane_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/testharness"
)

// cast_controlplane_nodes_down counts a registered node while its lease
// is lapsed, for as long as it stays away (CastNodesDown fires on it), and
// no longer once it is back.
func TestNodesDownGauge(t *testing.T) {
	cp := testharness.StartControlPlane(t, testharness.ShortLease)
	c := testharness.Dial(t, cp.Addr())
	down := func(want string) func() bool {
		return func() bool {
			resp, err := http.Get("http://" + cp.MetricsAddr() + "/metrics")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return strings.Contains(string(b), "\ncast_controlplane_nodes_down "+want+"\n")
		}
	}
	stop := testharness.StartNode(t, cp.Addr(), "a", nil)
	waitConnected(t, c, "a", true)
	testharness.WaitFor(t, 30*time.Second, "nodes_down 0 with the node up", down("0"))
	stop()
	waitConnected(t, c, "a", false)
	testharness.WaitFor(t, 30*time.Second, "nodes_down 1 with the node away", down("1"))
	testharness.StartNode(t, cp.Addr(), "a", nil)
	waitConnected(t, c, "a", true)
	testharness.WaitFor(t, 30*time.Second, "nodes_down 0 with the node back", down("0"))
}

// A fresh control plane exports the series its dashboards and alerts read
// at 0, before their first event (no "No data" panel on a new install).
func TestSeriesBeforeFirstEvent(t *testing.T) {
	t.Parallel()
	cp := testharness.StartControlPlane(t, nil)
	resp, err := http.Get("http://" + cp.MetricsAddr() + "/metrics")
	must(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`cast_controlplane_node_commands_total{kind="assign_session"} 0`,
		`cast_controlplane_node_commands_total{kind="deliver_messages"} 0`,
		`cast_account_switches_total{agent="claude",reason="limit"} 0`,
		`cast_account_switches_total{agent="codex",reason="manual"} 0`,
		"cast_controlplane_nodes_down 0",
		"cast_build_info{",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics of a fresh control plane lacks %s", want)
		}
	}
}
