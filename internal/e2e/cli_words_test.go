package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/pki"
)

// A cast that does not trust the TLS control plane's CA is told so, with
// the CA the control plane presented (its pin), the CA it expected, and
// how to get the right one; not "cannot reach … start it with
// `controlplane --dev`", whose advice only clashes on the port
// (TestTwoNodeBehaviours).
func trustFailureNamesTheCA(t *testing.T, r *mtlsRig) {
	caPEM, err := os.ReadFile(r.caFile)
	must(t, err)
	ca, err := pki.ParseCert(caPEM)
	must(t, err)
	presented := fmt.Sprintf("CA %q (pin %s)", ca.Subject.CommonName, r.pin)
	get := fmt.Sprintf("`cast --addr %s ca --ca-pin %s > ca.pem` fetches it once that pin matches the ca_pin the control plane logs, and the context's `ca:` (or CAST_CACERT) names that file", r.addr, r.pin)

	otherPEM, _, err := pki.NewCA(time.Hour)
	must(t, err)
	other, err := pki.ParseCert(otherPEM)
	must(t, err)
	otherFile := filepath.Join(t.TempDir(), "other-ca.pem")
	must(t, os.WriteFile(otherFile, otherPEM, 0o600))
	otherPin := fmt.Sprintf("sha256:%064x", 0)

	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"no CA", []string{"CAST_CACERT="}, fmt.Sprintf("cast: the control plane at %s speaks TLS, but no CA is trusted for it (no `ca:` or `ca-pin:` in the context, no CAST_CACERT or CAST_CA_PIN); it presented a certificate from %s: %s\n",
			r.addr, presented, get)},
		{"another CA file", []string{"CAST_CACERT=" + otherFile}, fmt.Sprintf("cast: the control plane at %s presented a certificate from %s, but the CA file %s (the context's `ca:`, or CAST_CACERT) trusts only %q (pin %s); if its CA was rotated, `cast ca bundle` (as an admin, trusting the old CA) prints the CAs to trust, else %s\n",
			r.addr, presented, otherFile, other.Subject.CommonName, pki.Pin(other), get)},
		{"another pin", []string{"CAST_CACERT=", "CAST_CA_PIN=" + otherPin}, fmt.Sprintf("cast: the control plane at %s presented a certificate from %s, but the context expects the CA pinned %s (ca-pin, or CAST_CA_PIN); if its CA was rotated, `cast ca bundle` (as an admin, trusting the old CA) prints the CAs to trust, else %s\n",
			r.addr, presented, otherPin, get)},
	} {
		_, errOut, code := r.cast(tc.env...).run("ls")
		if code != 1 || errOut != tc.want {
			t.Errorf("%s: cast ls: exit %d, stderr\n%s\nwant exit 1 and\n%s", tc.name, code, errOut, tc.want)
		}
	}
	// Nothing listening is still "cannot reach".
	nobody := freeAddr(t)
	_, errOut, code := r.cast("CAST_ADDR=" + nobody).run("ls")
	if want := fmt.Sprintf("cast: cannot reach the control plane at %s; start it with `controlplane --dev`, or point --addr / CAST_ADDR at it\n", nobody); code != 1 || errOut != want {
		t.Errorf("nothing listening: exit %d, stderr %q, want %q", code, errOut, want)
	}
}

// A mistyped agent or command is a usage mistake (exit 2) with a
// suggestion, refused before anything is sent (TestTwoNodeBehaviours).
func usageSuggestions(t *testing.T, c cli) {
	const agentList = "known agents: claude, codex, cursor, gemini, grok, muse, opencode, pi"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"new", "--agent", "claud", "hi"}, `cast: unknown agent "claud"; did you mean "claude"? ` + agentList},
		{[]string{"exec", "--agent", "codx", "hi"}, `cast: unknown agent "codx"; did you mean "codex"? ` + agentList},
		{[]string{"switch", "s1", "--agent", "gemeni"}, `cast: unknown agent "gemeni"; did you mean "gemini"? ` + agentList},
		{[]string{"new", "--agent", "zzzzzz", "hi"}, `cast: unknown agent "zzzzzz"; ` + agentList},
		{[]string{"lss"}, "cast: unknown command \"lss\" for \"cast\"; did you mean \"ls\"? see `cast --help`"},
		{[]string{"account", "lis"}, "cast: unknown command \"lis\" for \"cast account\"; did you mean \"ls\"? see `cast account --help`"},
	} {
		out, errOut, code := c.run(tc.args...)
		if code != 2 || errOut != tc.want+"\n" || out != "" {
			t.Errorf("cast %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", strings.Join(tc.args, " "), code, out, errOut, tc.want)
		}
	}
}
