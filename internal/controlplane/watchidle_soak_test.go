//go:build soak

package controlplane_test

import (
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/testharness"
)

// The issue's own check, with etcd's default token TTL (5 minutes) on the
// embedded etcd: a watch opened after 10 idle minutes works. It takes 10
// minutes, so it is built only with the soak tag (make soak).
func TestWatchAfterTenIdleMinutes(t *testing.T) {
	srv := testharness.StartControlPlane(t, nil)
	watchesWorkAfterIdle(t, srv, 10*time.Minute)
}
