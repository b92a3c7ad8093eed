// Package version is what every cast binary reports about its own build:
// the release set at link time by the Makefile, and the VCS revision, time
// and Go version the Go toolchain stamps into the binary.
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

// Revision is the commit, set at link time like Version; the Go toolchain's
// own VCS stamp wins when present (builds with -buildvcs=false, and in
// containers without .git, have none).
var Revision = ""

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
	in := Info{Version: Version, Revision: Revision, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return in
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.BuildTime = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
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
