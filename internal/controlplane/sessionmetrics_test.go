package controlplane

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/metrics"
	"github.com/cast-dev/cast/internal/store"
)

// A permission wait ends allowed, denied, or abandoned (the caller gone or
// the wait timed out); the waiting gauge goes back to 0.
func TestPermissionWaitOutcome(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		p    store.Permission
		err  error
		want string
	}{
		{"allowed", store.Permission{Answered: true, Allow: true}, nil, "allowed"},
		{"denied", store.Permission{Answered: true}, nil, "denied"},
		{"caller gone", store.Permission{}, context.Canceled, "abandoned"},
		{"watch ended", store.Permission{}, errors.New("permission watch ended"), "abandoned"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{m: metrics.NewControlPlane(nil)}
			done := s.permissionWait()
			if v := metrics.Value(s.m.PermissionWaiting); v != 1 {
				t.Fatalf("waiting %v during the wait", v)
			}
			done(tc.p, tc.err)
			if v := metrics.Value(s.m.PermissionWaiting); v != 0 {
				t.Fatalf("waiting %v after it", v)
			}
			for _, o := range metrics.PermissionOutcomes {
				n := histCount(t, s.m, o)
				if (o == tc.want) != (n == 1) {
					t.Errorf("outcome %s counted %d", o, n)
				}
			}
		})
	}
}

func histCount(t *testing.T, m *metrics.ControlPlane, outcome string) int {
	t.Helper()
	h, err := m.PermissionWaitSeconds.GetMetricWithLabelValues(outcome)
	if err != nil {
		t.Fatal(err)
	}
	return int(metrics.Value(h.(prometheus.Histogram)))
}

// Every stored state has a label, and the labels are the states' names.
func TestSessionStateLabels(t *testing.T) {
	t.Parallel()
	got := map[string]bool{}
	for _, st := range sessionStates() {
		got[st] = true
	}
	for _, want := range []string{"idle", "running", "waiting_permission", "parked", "failed"} {
		if !got[want] {
			t.Errorf("no state label %q in %v", want, sessionStates())
		}
	}
	if len(got) != len(castv1.SessionState_name)-1 {
		t.Errorf("%d labels for %d states", len(got), len(castv1.SessionState_name)-1)
	}
}
