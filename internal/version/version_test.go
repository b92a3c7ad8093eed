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
