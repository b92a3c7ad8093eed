package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// With no node connected at all, an import (which runs nothing) is stored
// for the first node to connect, and the send made meanwhile waits for it;
// once a node connects it owns the session, which is then switched to
// Claude and runs the waiting message with the imported conversation.
func TestImportWithNoNodeConnected(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude")
	if !r.node.Stop(30 * time.Second) {
		t.Log("the node did not stop on SIGTERM; killed")
	}
	testharness.WaitFor(t, 30*time.Second, "the node down", func() bool {
		resp, err := r.c.Nodes.ListNodes(context.Background(), &castv1.ListNodesRequest{})
		return err == nil && len(resp.Nodes) == 1 && !resp.Nodes[0].Connected
	})
	out, errOut, code := r.cast("", "import", "--agent", "grok", "--cwd", t.TempDir(), "../agents/grok/testdata/session-basic")
	id := strings.TrimSpace(out)
	want := "no node is connected: session " + id + " is stored, and the first node to connect takes it (start one with `node --controlplane ADDR`)\n"
	if code != 0 || id == "" || !strings.HasSuffix(errOut, want) {
		t.Fatalf("import with no node connected: exit %d, out %q, err %q; want it stored, saying\n%q", code, out, errOut, want)
	}
	_, errOut, code = r.cast("", "send", id, "MARK-NONODE go on")
	if wantWarn := "cast: warning: no node is connected; the message is stored (#"; code != 0 || !strings.HasPrefix(errOut, wantWarn) {
		t.Fatalf("send to the unowned import: exit %d, err %q; want it stored with %q", code, errOut, wantWarn)
	}
	r.startNode()
	testharness.WaitFor(t, 30*time.Second, "the node to take the import", func() bool {
		sess, err := r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{Id: id})
		return err == nil && sess.Node == "worker"
	})
	// The worker has no grok CLI: the waiting message fails there until
	// the session is switched to an agent it has.
	if _, errOut, code := r.cast("", "switch", id, "--agent", "claude"); code != 0 {
		t.Fatalf("switch the import to claude: exit %d, err %q", code, errOut)
	}
	seq := r.send(id, "MARK-NODE-BACK go on")
	// The message that waited for a node may run on Claude too, in a turn
	// of its own whose answer ends after seq: the session is settled once
	// this message is delivered, and the turn that carries it is the one
	// to read.
	testharness.WaitFor(t, 3*time.Minute, "MARK-NODE-BACK delivered and the session idle", func() bool {
		sess, err := r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{Id: id})
		return err == nil && sess.State == castv1.SessionState_SESSION_STATE_IDLE && sess.DeliveredSeq >= seq && sess.LastSeq > seq
	})
	turns := r.fake.Turns()
	last := -1
	for i, req := range turns {
		if strings.Contains(string(req.Body), "MARK-NODE-BACK") {
			last = i
		}
	}
	if last < 0 {
		t.Fatalf("no request to the model carried MARK-NODE-BACK (%d requests)", len(turns))
	}
	assertItems(t, turns[last].Items, "The README says the project is called Project", "MARK-NODE-BACK")
}

// cast runs the cast CLI against the rig's control plane with stdin.
func (r *turnRig) cast(stdin string, args ...string) (string, string, int) {
	r.t.Helper()
	bin := filepath.Join(testharness.Binaries(r.t), "cast")
	return testharness.RunInput(r.t, []string{"CAST_ADDR=" + r.addr}, strings.NewReader(stdin), 2*time.Minute, bin, args...)
}
