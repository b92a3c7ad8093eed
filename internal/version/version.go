// Package version is what every cast binary reports about its own build:
// the version and revision the build linked in (as the Makefile does), else
// what the Go toolchain stamped (the module version of `go install`, the VCS
// revision with its time and dirty flag), and the Go version.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is set at link time:
//
//	-ldflags "-X github.com/cast-dev/cast/internal/version.Version=v1.2.3"
//
// A binary built without it (go build, go test) reports "dev".
var Version = "dev"

// Revision is the commit, set at link time like Version.
var Revision = ""

// The rule, whichever way a binary was built: what the build linked in
// (-X Version, -X Revision: the Makefile, the test harness, a release
// script) wins, because someone chose it; what was not linked comes from
// the toolchain (the module version of `go install ...@v1.2.3`, the VCS
// stamp of a build inside a checkout with -buildvcs on); the rest is
// "dev" and no revision. The VCS time and dirty flag are reported only
// with the VCS revision they belong to.

// Info is one binary's build.
type Info struct {
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	BuildTime string `json:"build_time,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
}

// Get reads this binary's build.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return resolve(Version, Revision, bi)
}

// resolve applies the rule to what was linked and what the toolchain
// stamped (bi may be nil: no build information).
func resolve(linkedVersion, linkedRevision string, bi *debug.BuildInfo) Info {
	in := Info{Version: linkedVersion, Revision: linkedRevision, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi == nil {
		return in
	}
	var vcs Info
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			vcs.Revision = s.Value
		case "vcs.time":
			vcs.BuildTime = s.Value
		case "vcs.modified":
			vcs.Modified = s.Value == "true"
		}
	}
	if in.Revision == "" {
		in.Revision = vcs.Revision
	}
	if vcs.Revision != "" && vcs.Revision == in.Revision {
		in.BuildTime, in.Modified = vcs.BuildTime, vcs.Modified
	}
	if in.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		in.Version = bi.Main.Version // go install ...@v1.2.3
	}
	return in
}

// String is one line for --version: "v1.2.3 (abc1234, go1.25.0 linux/amd64)".
func (in Info) String() string {
	rev := in.Revision
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		rev = "unknown revision"
	}
	if in.Modified {
		rev += "-dirty"
	}
	return fmt.Sprintf("%s (%s, %s %s)", in.Version, rev, in.GoVersion, in.Platform)
}

// Skew says how two builds (a client's and a control plane's) differ, ""
// when they do not. Builds of one revision are the same code whatever
// each calls its version (`make build` links `git describe`, a plain `go
// build` in a checkout stamps a pseudo-version), so they do not differ;
// a "dev" build (`go run`, `go test`, no VCS stamp) has no version to
// order, so the advice to upgrade the older one would be a guess.
func Skew(client, server Info) string {
	switch {
	case client.Version == server.Version,
		client.Revision != "" && client.Revision == server.Revision && client.Modified == server.Modified:
		return ""
	case client.Version == "dev" || server.Version == "dev":
		return fmt.Sprintf("client %s and control plane %s may differ: a dev build (go run, go test, no VCS stamp) has no version to compare", client.Version, server.Version)
	}
	return fmt.Sprintf("client %s and control plane %s differ; upgrade the older one", client.Version, server.Version)
}
