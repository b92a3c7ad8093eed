package faults_test

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/faults"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// Two control plane replicas over one etcd; a node (real Claude against
// the fake model) and a `cast watch` given both, so both use the first.
// That replica is killed -9 while a turn waits on the model: the node
// moves to the other, the turn's answer and a message sent meanwhile are
// each answered once, and the watch resumes on the other replica from the
// seq after the last it showed: every stored message once, in order.
func TestReplicaKilledUnderAWatchAndANode(t *testing.T) {
	r := &haRig{t: t, bin: testharness.Binaries(t), cluster: testharness.StartEtcdProcCluster(t, 1),
		keyFile: filepath.Join(t.TempDir(), "secrets.key")}
	r.addrs = []string{testharness.FreeAddr(t), testharness.FreeAddr(t)}
	for i := range r.addrs {
		r.replicas = append(r.replicas, r.startReplica(i, nil))
	}
	fake := fakemodel.Start(t)
	dir, _ := startNode(t, r.list(), "n1", "", withClaude(t, fake))
	c := testharness.Dial(t, r.addrs[1]) // the survivor's client
	waitConnected(t, c, "n1", time.Minute)
	tr := &turns{c: c, sess: newSessions(t, c, "n1", "claude", t.TempDir(), 1)[0]}
	tr.send(t)
	tr.waitAnswered(t, 2*time.Minute, "the first answer")

	watch := testharness.StartProcEnv(t, []string{"CAST_ADDR=" + r.list(), "CAST_TOKEN=" + testharness.AdminToken(), "HOME=" + t.TempDir()},
		filepath.Join(r.bin, "cast"), "watch", tr.sess)
	shown := func(text string) func() bool { return func() bool { return strings.Contains(watch.Output(), text) } }
	testharness.WaitFor(t, 30*time.Second, "the watch shows the first prompt", shown(tr.prompts[0]))

	// The answers from now on wait for the gate, and name their prompt.
	gate := make(chan struct{})
	fake.SetPolicy(func(req fakemodel.Request) fakemodel.Reply {
		return fakemodel.Reply{Text: "answered across the replica's death: " + fakemodel.LastUserText(req.Items), Gate: gate}
	})
	n := fake.TurnsStarted()
	tr.send(t)
	testharness.WaitFor(t, 2*time.Minute, "the held request at the model", func() bool { return fake.TurnsStarted() > n })
	testharness.WaitFor(t, 30*time.Second, "the watch shows the held prompt", shown(tr.prompts[1]))
	r.replicas[0].Kill()
	tr.send(t) // through the survivor, while the node moves to it
	close(gate)
	tr.waitAnswered(t, 2*time.Minute, "every answer after the replica died")
	ck := faults.Checker{Sessions: c.Sessions, Claims: claims(map[string]string{"n1": dir})}
	tr.checkAnswered(t, ck)
	check(t, ck, "HA: replica under a watch and a node", tr.acks)

	// The watch shows every stored message once, in seq order.
	read, err := c.Sessions.ListMessages(context.Background(), &castv1.ListMessagesRequest{SessionId: tr.sess})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, m := range read.Messages {
		want = append(want, "#"+strconv.FormatInt(m.Seq, 10))
	}
	last := want[len(want)-1]
	var got []string
	testharness.WaitFor(t, 30*time.Second, "the watch shows the last message", func() bool {
		got = got[:0]
		for _, line := range strings.Split(watch.Output(), "\n") {
			if strings.HasPrefix(line, "#") {
				got = append(got, strings.Fields(line)[0])
			}
		}
		return len(got) > 0 && got[len(got)-1] == last
	})
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("the watch showed %s, stored %s:\n%s", strings.Join(got, " "), strings.Join(want, " "), watch.Output())
	}
	if !strings.Contains(watch.Output(), "reconnecting") {
		t.Fatalf("the watch never lost its replica:\n%s", watch.Output())
	}
}
