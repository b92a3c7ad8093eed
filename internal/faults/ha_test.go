package faults_test

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/faults"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/testharness"
)

// haRig is an HA deployment as real processes on loopback: three
// controlplane replicas over a three-member etcd cluster, and node
// processes given every replica's address (--controlplane a,b,c).
type haRig struct {
	t        *testing.T
	bin      string
	cluster  *testharness.EtcdProcCluster
	addrs    []string // replicas' gRPC addresses, in the nodes' order
	replicas []*testharness.Proc
	keyFile  string // the secrets key all replicas share
	nodes    map[string]*testharness.Proc
	dirs     map[string]string // node -> data dir
}

func newHARig(t *testing.T) *haRig {
	r := &haRig{t: t, bin: testharness.Binaries(t), cluster: testharness.StartEtcdProcCluster(t, 3),
		keyFile: filepath.Join(t.TempDir(), "secrets.key"), nodes: map[string]*testharness.Proc{}, dirs: map[string]string{}}
	for range 3 {
		r.addrs = append(r.addrs, testharness.FreeAddr(t))
	}
	// The first replica makes the shared secrets key; the others read it.
	// It is the victim: it kills itself (SIGKILL) right after fencing the
	// first session of a migration it runs.
	r.replicas = append(r.replicas, r.startReplica(0, []string{"CAST_FAILPOINTS=migrate.after-fence"}))
	for i := 1; i < 3; i++ {
		r.replicas = append(r.replicas, r.startReplica(i, nil))
	}
	return r
}

// startReplica runs controlplane replica i with env added and waits until
// it answers.
func (r *haRig) startReplica(i int, env []string) *testharness.Proc {
	p := testharness.StartProcEnv(r.t, env, filepath.Join(r.bin, "controlplane"),
		"--listen", r.addrs[i], "--metrics-listen", "", "--data-dir", r.t.TempDir(), "--replica-id", "cp"+string(rune('0'+i)),
		"--etcd-endpoints", strings.Join(r.cluster.Endpoints(), ","), "--secrets-key-file", r.keyFile,
		"--node-lease-ttl", "2s", "--node-heartbeat", "500ms", "--insecure")
	c := testharness.Dial(r.t, r.addrs[i])
	testharness.WaitFor(r.t, 60*time.Second, "replica "+r.addrs[i]+" up", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := c.Nodes.ListNodes(ctx, &castv1.ListNodesRequest{})
		return err == nil
	})
	return p
}

// list is the replicas' addresses as --controlplane takes them.
func (r *haRig) list() string { return strings.Join(r.addrs, ",") }

// startNode runs a node process given every replica; its agents' CLIs
// are missing, so turns fail at once (the test is about what is stored
// and who owns it).
func (r *haRig) startNode(name string) {
	dir := r.t.TempDir()
	setups := map[string]map[string]any{}
	for _, a := range agents.Names() {
		setups[a] = map[string]any{"bin": filepath.Join(dir, "no-agent-cli", a)}
	}
	cfg := filepath.Join(r.t.TempDir(), "agents.json")
	b, _ := json.Marshal(setups)
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		r.t.Fatal(err)
	}
	r.dirs[name] = dir
	r.nodes[name] = testharness.StartProc(r.t, filepath.Join(r.bin, "node"), "--controlplane", r.list(),
		"--data-dir", dir, "--name", name, "--agents-config", cfg, "--log-format", "json")
}

// replicaOf is the replica the node's newest stream went to, from its
// "connected to control plane" log lines, and how many such lines there
// are.
func (r *haRig) replicaOf(name string) (string, int) {
	sc := bufio.NewScanner(strings.NewReader(r.nodes[name].Output()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	last, n := "", 0
	for sc.Scan() {
		var line struct {
			Msg     string `json:"msg"`
			Replica string `json:"replica"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "connected to control plane" {
			last, n = line.Replica, n+1
		}
	}
	return last, n
}

// Three control plane replicas over a three-member etcd cluster, all real
// processes on loopback, two nodes given every replica's address. Under a
// bounded workload of writers (retrying with their request ids), the etcd
// leader is killed -9, then a migration of idle sessions is started on the
// replica both nodes are connected to, which is killed -9 in the middle of
// it (after it fenced a session). The nodes move to another replica, the
// writers go on through the others, a surviving replica adopts the
// migration and completes it or rolls it back, and every acknowledged
// message is there exactly once, with one owner per session.
func TestHAReplicaAndEtcdMemberKilled(t *testing.T) {
	r := newHARig(t)
	victim := r.addrs[0]
	r.startNode("n1")
	r.startNode("n2")
	// A client of a live replica (the last in the list) to watch with;
	// the writers are given the whole list, the victim first.
	watch := testharness.Dial(t, r.addrs[2])
	for _, n := range []string{"n1", "n2"} {
		waitConnected(t, watch, n, 60*time.Second)
		// The control plane can see the stream before the node has
		// logged which replica it reached.
		testharness.WaitFor(t, 60*time.Second, n+" logs its replica", func() bool {
			got, _ := r.replicaOf(n)
			return got != ""
		})
		if got, _ := r.replicaOf(n); got != victim {
			t.Fatalf("%s connected to %q, want the first replica %s", n, got, victim)
		}
	}
	c, err := client.DialToken(r.list(), testharness.AdminToken())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	sessions := append(newSessions(t, c, "n1", "claude", "", 2), newSessions(t, c, "n2", "claude", "", 2)...)
	moving := newSessions(t, c, "n1", "claude", "", scale(4, 20))
	l := newLoad(c.Sessions, sessions)
	stopLoad := l.start(scale(3, 6), time.Duration(scale(180, 900))*time.Second)
	defer stopLoad()
	l.phase(t, phase, phaseWait, "acknowledgements with everything up")

	// The etcd leader is killed -9 while writes are under way: the rest
	// elect a new one and the replicas' clients move to a live member.
	l.allow(phase)
	r.cluster.Members[r.cluster.Leader(t, 30*time.Second)].Kill()
	l.phase(t, phase, phaseWait, "acknowledgements with two of three etcd members")

	// The migration goes to the victim, which kills itself at its
	// failpoint: a replica dies with the migration in flight.
	before := map[string]int{}
	for _, n := range []string{"n1", "n2"} {
		_, before[n] = r.replicaOf(n)
	}
	l.allow(phase) // writes under way through the victim as it dies
	vc := testharness.Dial(t, victim)
	start := &castv1.StartMigrationRequest{To: "n2", SessionIds: moving, RequestId: ids.NewClientID(), SkipWorktree: true}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, startErr := vc.Migrations.StartMigration(ctx, start)
	cancel()
	if code, ok := r.replicas[0].Wait(60 * time.Second); !ok || code != -1 {
		t.Fatalf("the victim replica did not die at its failpoint (exit %d, exited %v; start: %v)", code, ok, startErr)
	}
	// Messages to the moving sessions while their migration is orphaned:
	// acknowledged by a survivor, retried with their ids.
	var held []faults.Ack
	for _, s := range moving[:2] {
		a := faults.Ack{Session: s, ClientID: ids.NewClientID(), Body: []byte("sent while the migration was orphaned")}
		a.Seq = sendRetrying(t, c, a)
		held = append(held, a)
	}
	l.phase(t, phase, phaseWait, "acknowledgements after the replica died")

	// The nodes noticed and moved to another replica.
	for _, n := range []string{"n1", "n2"} {
		testharness.WaitFor(t, 60*time.Second, n+" on another replica", func() bool {
			got, k := r.replicaOf(n)
			return k > before[n] && got != "" && got != victim
		})
		waitConnected(t, watch, n, 60*time.Second)
	}
	// A survivor adopted the migration (the request id finds it, or
	// starts it if the victim died before recording it) and ended it.
	m := retryStartMigration(t, c, start)
	m = waitMigrationEnd(t, c, m.Id)
	t.Logf("migration %s ended %v", m.Id, m.State)
	if !strings.Contains(r.replicas[1].Output()+r.replicas[2].Output(), `"msg":"running migration","migration":"`+m.Id) {
		t.Errorf("no surviving replica says it ran migration %s", m.Id)
	}
	for _, ms := range m.Sessions {
		s, err := c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{Id: ms.SessionId})
		if err != nil {
			t.Fatal(err)
		}
		want := map[castv1.MigrationState]string{castv1.MigrationState_MIGRATION_STATE_SUCCEEDED: "n2",
			castv1.MigrationState_MIGRATION_STATE_FAILED: "n1", castv1.MigrationState_MIGRATION_STATE_CANCELLED: "n1"}[ms.State]
		if want == "" || s.Node != want || s.FencedBy != "" {
			t.Errorf("session %s: migration state %v (%s), on %q fenced %q; want it on %q, unfenced", s.Id, ms.State, ms.Reason, s.Node, s.FencedBy, want)
		}
	}
	l.phase(t, phase, phaseWait, "acknowledgements after the migration")
	stopLoad()
	t.Log(l.summary())
	l.clean(t)
	ck := faults.Checker{Sessions: c.Sessions, Claims: claims(r.dirs)}
	check(t, ck, "HA: replica and etcd member", append(l.snapshot(), held...))
}

// retryStartMigration repeats a start whose answer may have been lost; its
// request id returns the migration recorded first.
func retryStartMigration(t *testing.T, c *client.Client, req *castv1.StartMigrationRequest) *castv1.Migration {
	t.Helper()
	var m *castv1.Migration
	testharness.WaitFor(t, 60*time.Second, "start migration answered", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		var err error
		m, err = c.Migrations.StartMigration(ctx, req)
		return err == nil
	})
	return m
}

// waitMigrationEnd waits until migration id is in a final state.
func waitMigrationEnd(t *testing.T, c *client.Client, id string) *castv1.Migration {
	t.Helper()
	var m *castv1.Migration
	testharness.WaitFor(t, 2*time.Minute, "migration "+id+" to end", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		got, err := c.Migrations.GetMigration(ctx, &castv1.GetMigrationRequest{Id: id})
		if err != nil {
			return false
		}
		m = got
		switch got.State {
		case castv1.MigrationState_MIGRATION_STATE_SUCCEEDED, castv1.MigrationState_MIGRATION_STATE_FAILED, castv1.MigrationState_MIGRATION_STATE_CANCELLED:
			return true
		}
		return false
	})
	return m
}
