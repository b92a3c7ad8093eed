package version

import (
	"runtime/debug"
	"testing"
)

// The rule, case by case: linked wins, the toolchain fills in, VCS time
// and dirty flag only with their own revision.
func TestResolve(t *testing.T) {
	const linked, vcsRev = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	withVCS := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: vcsRev}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	noVCS := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}
	installed := &debug.BuildInfo{Main: debug.Module{Version: "v0.3.1"}}
	for _, tc := range []struct {
		name              string
		version, revision string
		bi                *debug.BuildInfo
		want              Info
	}{
		{"linked, built with VCS (make build in a checkout)", "v0.2.0", linked, withVCS, Info{Version: "v0.2.0", Revision: linked}},
		{"linked, built without VCS (-buildvcs=false, a container without .git)", "v0.2.0", linked, noVCS, Info{Version: "v0.2.0", Revision: linked}},
		{"linked the VCS revision itself", "v0.2.0", vcsRev, withVCS, Info{Version: "v0.2.0", Revision: vcsRev, BuildTime: "2026-12-01T10:00:00Z", Modified: true}},
		{"go build in a checkout", "dev", "", withVCS, Info{Version: "dev", Revision: vcsRev, BuildTime: "2026-12-01T10:00:00Z", Modified: true}},
		{"go build without VCS", "dev", "", noVCS, Info{Version: "dev"}},
		{"go install @v0.3.1", "dev", "", installed, Info{Version: "v0.3.1"}},
		{"no build information", "dev", "", nil, Info{Version: "dev"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := resolve(tc.version, tc.revision, tc.bi)
			got.GoVersion, got.Platform = "", ""
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// Skew warns only where builds differ, and says "upgrade the older one"
// only where both have a version to order.
func TestSkew(t *testing.T) {
	const a, b = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	for _, tc := range []struct {
		name           string
		client, server Info
		want           string
	}{
		{"one version", Info{Version: "v0.2.0", Revision: a}, Info{Version: "v0.2.0", Revision: a}, ""},
		{"one revision, two names (make build's git describe, go build's pseudo-version)",
			Info{Version: "1111111", Revision: a}, Info{Version: "v0.0.0-20261207151518-111111111111", Revision: a}, ""},
		{"one revision, one of them with local changes",
			Info{Version: "1111111-dirty", Revision: a, Modified: true}, Info{Version: "v0.0.0-20261207151518-111111111111", Revision: a},
			"client 1111111-dirty and control plane v0.0.0-20261207151518-111111111111 differ; upgrade the older one"},
		{"two releases", Info{Version: "v0.2.0", Revision: a}, Info{Version: "v0.3.0", Revision: b},
			"client v0.2.0 and control plane v0.3.0 differ; upgrade the older one"},
		{"a dev control plane (go run)", Info{Version: "v0.2.0", Revision: a}, Info{Version: "dev"},
			"client v0.2.0 and control plane dev may differ: a dev build (go run, go test, no VCS stamp) has no version to compare"},
		{"a dev client of the control plane's revision", Info{Version: "dev", Revision: a}, Info{Version: "v0.2.0", Revision: a}, ""},
		{"two dev builds", Info{Version: "dev"}, Info{Version: "dev"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Skew(tc.client, tc.server); got != tc.want {
				t.Fatalf("Skew = %q, want %q", got, tc.want)
			}
		})
	}
}
