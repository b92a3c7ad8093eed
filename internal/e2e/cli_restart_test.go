package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/testharness"
)

// `cast watch` follows a session through two control plane restarts (a
// clean stop and a kill -9) and shows every message once, in order; a
// `cast send` issued while the control plane is down for longer than the old
// 3-attempt retry lasted is stored once when it comes back.
func TestCLIWatchAndSendRideOutControlPlaneRestarts(t *testing.T) {
	t.Parallel()
	bins := testharness.Binaries(t)
	dataDir, addr := t.TempDir(), freeAddr(t)
	startCP := func() *testharness.Proc {
		return testharness.StartProc(t, filepath.Join(bins, "controlplane"), "--data-dir", dataDir, "--listen", addr,
			"--metrics-listen", "", "--node-lease-ttl", "2s", "--node-heartbeat", "500ms")
	}
	cp := startCP()
	c := cli{t: t, bin: filepath.Join(bins, "cast"), env: []string{"CAST_ADDR=" + addr, "HOME=" + t.TempDir()}}
	testharness.StartNode(t, addr, "n1", func(cfg *node.Config) {
		cfg.AgentBins, cfg.Agents = map[string]string{}, map[string]node.AgentSetup{"claude": {Bin: filepath.Join(t.TempDir(), "no-cli")}}
	})
	c.waitNode("n1", true)
	cl := testharness.Dial(t, addr)
	sess, err := cl.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "claude", Node: "n1", Cwd: t.TempDir(), HistoryMessages: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Sessions.AppendMessages(context.Background(), &castv1.AppendMessagesRequest{SessionId: sess.Id,
		Messages: []*castv1.Message{{ClientId: "h1", Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "MARK-0"}}}); err != nil {
		t.Fatal(err)
	}
	watch := testharness.StartProcEnv(t, c.env, c.bin, "watch", sess.Id)
	shown := func(mark string) func() bool {
		return func() bool { return strings.Contains(watch.Output(), mark) }
	}
	c.must("send", "-s", sess.Id, "MARK-1")
	testharness.WaitFor(t, 30*time.Second, "watch shows MARK-1", shown("MARK-1"))

	// A clean stop ends the watch stream; the send is issued while the
	// control plane is down and lands after it is back.
	if !cp.Stop(20 * time.Second) {
		t.Fatal("control plane did not stop on SIGTERM")
	}
	sent := inBackground(func() (string, string, int) { return c.run("send", "-s", sess.Id, "MARK-2") })
	cwd := t.TempDir()
	created := inBackground(func() (string, string, int) {
		return c.run("new", "--agent", "claude", "--cwd", cwd, "--json", "MARK-NEW")
	})
	time.Sleep(5 * time.Second) // the outage: longer than a restart takes
	cp = startCP()
	if r := <-sent; r.code != 0 {
		t.Fatalf("send through the restart: exit %d: %s", r.code, r.errOut)
	}
	if r := <-created; r.code != 0 {
		t.Fatalf("new through the restart: exit %d: %s", r.code, r.errOut)
	}
	var list struct {
		Sessions []struct{ Title string } `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(c.must("ls", "--all", "--json")), &list); err != nil || len(list.Sessions) != 2 || list.Sessions[0].Title != "MARK-NEW" {
		t.Fatalf("sessions after a create through the restart: %v %+v", err, list)
	}
	testharness.WaitFor(t, 30*time.Second, "watch shows MARK-2", shown("MARK-2"))

	cp.Kill()
	cp = startCP()
	c.must("send", "-s", sess.Id, "MARK-3")
	testharness.WaitFor(t, 30*time.Second, "watch shows MARK-3", shown("MARK-3"))
	if code, exited := watch.Wait(0); exited {
		t.Fatalf("cast watch exited (%d):\n%s", code, watch.Output())
	}

	var read struct {
		Messages []struct {
			Seq  string `json:"seq"`
			Text string `json:"text"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(c.must("read", sess.Id, "--json")), &read); err != nil {
		t.Fatal(err)
	}
	stored := map[string]int{}
	for _, m := range read.Messages {
		stored[m.Text]++
	}
	for _, mark := range []string{"MARK-0", "MARK-1", "MARK-2", "MARK-3"} {
		if stored[mark] != 1 {
			t.Fatalf("%s stored %d times", mark, stored[mark])
		}
	}
	// Every stored message appears in the watch exactly once, in seq order.
	out := watch.Output()
	var seqs []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "#") {
			seqs = append(seqs, strings.Fields(line)[0])
		}
	}
	var want []string
	for _, m := range read.Messages {
		want = append(want, "#"+m.Seq)
	}
	if got := strings.Join(seqs, " "); !strings.HasPrefix(got, strings.Join(want, " ")) {
		t.Fatalf("watch showed %s, stored %s:\n%s", got, strings.Join(want, " "), out)
	}
	if !strings.Contains(out, "reconnecting") {
		t.Fatalf("watch did not say it was reconnecting:\n%s", out)
	}
}
