package fleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/fleet"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/metrics"
)

// The usage gauges carry the figures `cast usage` shows: by default the
// account label is only "active" or "best" (no names); with
// MetricsAccountNames (the operator allows it) it is the account's name. The listing says how old the figure is and where a
// switch would go.
func TestUsageGauges(t *testing.T) {
	for _, names := range []bool{false, true} {
		r := newRigConfig(t, true, fleet.Config{Policy: fleet.PolicyAuto, MetricsAccountNames: names})
		ctx := context.Background()
		r.putAB(t)
		must(t, r.mg.OnUsage(ctx, "s1", "claude", "a", []*castv1.UsageWindow{window(60, 300, r.now.Add(2*time.Hour))}))
		must(t, r.mg.OnUsage(ctx, "s2", "claude", "b", []*castv1.UsageWindow{window(25, 300, r.now.Add(3*time.Hour))}))
		r.advance(10 * time.Minute)
		must(t, r.mg.Sweep(ctx))
		active, best := "active", "best"
		if names {
			active, best = "a", "b"
		}
		for _, tc := range []struct {
			got, want float64
		}{
			{metrics.Value(r.m.UsagePercent.WithLabelValues("claude", active, "primary")), 60},
			{metrics.Value(r.m.UsagePercent.WithLabelValues("claude", best, "primary")), 25},
			{metrics.Value(r.m.UsageResetSeconds.WithLabelValues("claude", active, "primary")), 110 * 60},
			{metrics.Value(r.m.UsageAgeSeconds.WithLabelValues("claude", best)), 600},
		} {
			if tc.got != tc.want {
				t.Errorf("names=%v: gauge %v, want %v", names, tc.got, tc.want)
			}
		}
		if n := metrics.Series(r.m.UsagePercent); n != 2 {
			t.Errorf("names=%v: %d usage series, want 2", names, n)
		}
		list, err := r.mg.List(ctx, "claude")
		must(t, err)
		if !list[1].UsageAt.AsTime().Equal(r.now.Add(-10*time.Minute)) || list[1].Policy != fleet.PolicyAuto {
			t.Errorf("listing: %v", list[1])
		}
		fleets, err := r.mg.Fleets(ctx, "")
		must(t, err)
		if len(fleets) != 1 || fleets[0].Best != "b" || fleets[0].BestUsedPercent != 25 || fleets[0].Active != "a" || fleets[0].Policy != "auto" {
			t.Errorf("fleets: %v", fleets)
		}
	}
}
