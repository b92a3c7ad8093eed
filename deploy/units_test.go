package deploy_test

import (
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/testharness"
)

// The systemd units load without a complaint from systemd-analyze (an
// unknown key or a misspelt value is only a warning there, so any output
// fails), run Type=notify (the daemons send READY=1: TestDaemonsNotifySystemd
// in internal/e2e), and pass only flags the daemon has.
func TestSystemdUnits(t *testing.T) {
	bins := testharness.Binaries(t)
	for _, tc := range []struct{ unit, bin string }{
		{"cast-node.service", "node"},
		{"cast-controlplane.service", "controlplane"},
	} {
		t.Run(tc.unit, func(t *testing.T) {
			src, err := os.ReadFile(filepath.Join("systemd", tc.unit))
			if err != nil {
				t.Fatal(err)
			}
			unit := string(src)
			exe := regexp.MustCompile(`(?m)^ExecStart=(\S+)(.*)$`).FindStringSubmatch(unit)
			if exe == nil {
				t.Fatal("no ExecStart")
			}
			if !strings.HasSuffix(exe[1], "/"+tc.bin) {
				t.Errorf("ExecStart runs %s, want the %s binary", exe[1], tc.bin)
			}
			if !strings.Contains(unit, "\nType=notify\n") {
				t.Error("want Type=notify")
			}
			checkFlags(t, filepath.Join(bins, tc.bin), strings.Fields(exe[2]))

			// Verify a copy whose ExecStart is the built binary (the
			// documented path does not exist here).
			dir := t.TempDir()
			copyPath := filepath.Join(dir, tc.unit)
			if err := os.WriteFile(copyPath, []byte(strings.Replace(unit, exe[0], "ExecStart="+filepath.Join(bins, tc.bin)+exe[2], 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("systemd-analyze", "verify", copyPath)
			cmd.Env = testharness.ScratchEnv(t)
			out, err := cmd.CombinedOutput()
			if err != nil || len(strings.TrimSpace(string(out))) > 0 {
				t.Errorf("systemd-analyze verify %s: %v\n%s", tc.unit, err, out)
			}
		})
	}
}

// The launchd plist is a well-formed property list that runs the node
// binary with flags it has.
func TestLaunchdPlist(t *testing.T) {
	src, err := os.ReadFile("launchd/dev.cast.node.plist")
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	d := xml.NewDecoder(strings.NewReader(string(src)))
	inArgs, key := false, ""
	for {
		tok, err := d.Token()
		if err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("plist: %v", err)
			}
			break
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if el.Name.Local == "array" && key == "ProgramArguments" {
				inArgs = true
			}
			if el.Name.Local == "key" || (inArgs && el.Name.Local == "string") {
				var text string
				if err := d.DecodeElement(&text, &el); err != nil {
					t.Fatal(err)
				}
				if el.Name.Local == "key" {
					key = text
				} else {
					args = append(args, text)
				}
			}
		case xml.EndElement:
			if el.Name.Local == "array" {
				inArgs = false
			}
		}
	}
	if len(args) < 2 || filepath.Base(args[0]) != "node" {
		t.Fatalf("ProgramArguments %q: want the node binary first", args)
	}
	checkFlags(t, filepath.Join(testharness.Binaries(t), "node"), args[1:])
}

// checkFlags fails for an --flag in args that bin's --help does not list.
func checkFlags(t *testing.T, bin string, args []string) {
	t.Helper()
	help, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --help: %v", bin, err)
	}
	for _, a := range args {
		name, _, _ := strings.Cut(a, "=")
		if strings.HasPrefix(name, "--") && !strings.Contains(string(help), "      "+name+" ") {
			t.Errorf("%s has no flag %s", filepath.Base(bin), name)
		}
	}
}
