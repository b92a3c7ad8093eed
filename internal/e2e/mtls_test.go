package e2e

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/secrets"
	"github.com/cast-dev/cast/internal/testharness"
)

func identityLeaf(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	id, err := client.LoadIdentity(path)
	if err != nil || !id.HasCert() {
		t.Fatalf("identity %s: %v", path, err)
	}
	return id.Cert().Leaf
}

// renewals counts a node process's "client certificate renewed" lines.
func renewals(p *testharness.Proc) int {
	return strings.Count(p.Output(), `"client certificate renewed"`)
}

// A real Claude Code turn runs while its node's client certificate is
// renewed twice and the certificate the node started the turn with
// expires: the node moves its calls and its stream to connections with
// the new certificate, and the turn's every row is stored, once and in
// order.
func TestCertRenewalUnderRunningTurn(t *testing.T) {
	t.Parallel()
	r := newTurnRigWith(t, func(c *controlplane.Config, _ string) {
		c.TLS.Enabled, c.TLS.NodeCertTTL = true, 8*time.Second
	}, "claude")
	turn := startHeldReadTurn(t, r, 4, 4, "RENEWED TURN DONE")
	idPath := filepath.Join(r.dataDir, client.NodeIdentityFile)
	first, seen := identityLeaf(t, idPath), renewals(r.node)
	testharness.WaitFor(t, 30*time.Second, "two renewals and the first certificate's expiry, mid-turn", func() bool {
		return renewals(r.node) >= seen+2 && time.Now().After(first.NotAfter)
	})
	turn.finish(t, r)
}

// heldReadTurn is a real Claude Code turn reading a note before+1+after
// times, held on the model at the before+1st until finish.
type heldReadTurn struct {
	id            string
	gate          chan struct{}
	before, after int
	done          string
}

// startHeldReadTurn starts the turn and waits until it is held.
func startHeldReadTurn(t *testing.T, r *turnRig, before, after int, done string) *heldReadTurn {
	t.Helper()
	cwd := t.TempDir()
	note := filepath.Join(cwd, "note.txt")
	must(t, os.WriteFile(note, []byte("a small file\n"), 0o600))
	read := fakemodel.Reply{Text: "reading the note", Tool: &fakemodel.ToolCall{Name: "Read", Input: map[string]any{"file_path": note}}}
	h := &heldReadTurn{gate: make(chan struct{}), before: before, after: after, done: done}
	held := read
	held.Gate = h.gate
	r.fake.Enqueue(fakemodel.Repeat(before, read)...)
	r.fake.Enqueue(held)
	r.fake.Enqueue(fakemodel.Repeat(after, read)...)
	r.fake.Enqueue(fakemodel.Reply{Text: done})
	sess, err := r.c.Sessions.CreateSession(context.Background(), &castv1.CreateSessionRequest{Agent: "claude", Cwd: cwd, Text: "read the note a few times"})
	must(t, err)
	h.id = sess.Id
	testharness.WaitFor(t, 5*time.Minute, "the turn held on the model", func() bool { return r.fake.TurnsStarted() > before })
	return h
}

// finish releases the turn and checks every row was stored once, in
// order, and that the node was never refused.
func (h *heldReadTurn) finish(t *testing.T, r *turnRig) {
	t.Helper()
	if s, err := r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{Id: h.id}); err != nil || s.State != castv1.SessionState_SESSION_STATE_RUNNING {
		t.Fatalf("the turn is not running while held: %v %v", s, err)
	}
	close(h.gate)
	r.waitState(h.id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	var msgs []*castv1.Message
	testharness.WaitFor(t, time.Minute, "the turn's last answer", func() bool {
		msgs = r.allMessages(h.id)
		return lastAssistant(msgs) == h.done
	})
	calls := 0
	for i, m := range msgs {
		if m.Seq != int64(i+1) {
			t.Fatalf("message %d has seq %d: the transcript has a gap or a duplicate", i, m.Seq)
		}
		if m.Kind == castv1.MessageKind_MESSAGE_KIND_TOOL_CALL {
			calls++
		}
	}
	if calls != h.before+1+h.after {
		t.Fatalf("%d tool calls stored, want %d (kinds: %s)", calls, h.before+1+h.after, kinds(msgs))
	}
	if out := r.node.Output(); strings.Contains(out, "credential refused") || strings.Contains(out, "CERT_") {
		t.Fatalf("the node was refused:\n%s", out)
	}
}

// mtlsRig is a TLS control plane process with short node certificates,
// its admin's cast, and its CA pin.
type mtlsRig struct {
	t               *testing.T
	bins, dir, addr string
	pin, caFile     string
	token           string // the admin's
	admin           cli
	agents          string
	cp              *testharness.Proc
}

func newMTLSRig(t *testing.T, args ...string) *mtlsRig {
	bins := testharness.Binaries(t)
	r := &mtlsRig{t: t, bins: bins, dir: t.TempDir(), addr: freeAddr(t), agents: missingAgentsConfig(t)}
	// Not the harness's plaintext: TLS is the default without --insecure.
	env := append(append([]string{}, noHarnessAuth...), "CAST_INSECURE=")
	cp := testharness.StartProcEnv(t, env, filepath.Join(bins, "controlplane"), append([]string{"--data-dir", r.dir, "--listen", r.addr,
		"--metrics-listen", "", "--node-cert-ttl", "8s"}, args...)...)
	testharness.WaitFor(t, 30*time.Second, "the CA pin in the log", func() bool {
		_, rest, ok := strings.Cut(cp.Output(), `"ca_pin":"`)
		r.pin, _, _ = strings.Cut(rest, `"`)
		return ok && r.pin != ""
	})
	tok, err := secrets.ReadToken(filepath.Join(r.dir, "admin.token"))
	must(t, err)
	r.caFile, r.token, r.cp = filepath.Join(r.dir, "ca.pem"), tok, cp
	r.admin = r.cast("CAST_TOKEN=" + tok)
	return r
}

// cast runs the CLI trusting the rig's CA, with env's credentials.
func (r *mtlsRig) cast(env ...string) cli {
	return cli{t: r.t, bin: filepath.Join(r.bins, "cast"),
		env: append(append(append([]string{}, noHarnessAuth...), "CAST_INSECURE=", "CAST_ADDR="+r.addr, "CAST_CACERT="+r.caFile), env...)}
}

// node starts node process name (data dir under the rig's) with every
// agent at a path with no CLI.
func (r *mtlsRig) node(name string, args ...string) (*testharness.Proc, string) {
	return r.nodeWith(name, r.agents, nil, args...)
}

// nodeWith is node with its agents from agentsCfg and env added.
func (r *mtlsRig) nodeWith(name, agentsCfg string, env []string, args ...string) (*testharness.Proc, string) {
	dir := filepath.Join(r.dir, "node-"+name)
	return testharness.StartProcEnv(r.t, append(append(append([]string{}, noHarnessAuth...), "CAST_INSECURE="), env...), filepath.Join(r.bins, "node"),
		append([]string{"--controlplane", r.addr, "--data-dir", dir, "--name", name, "--cast-bin", "", "--agents-config", agentsCfg,
			"--ca-pin", r.pin}, args...)...), dir
}

// Through the real binaries with TLS: nodes join with one-time join
// tokens (`node --join-token` and `cast node join`) and then prove who they
// are with their own certificates; a node without a valid join token gets
// none; node A's certificate cannot act as node B; expired, foreign and
// revoked certificates are refused with a reason; a user's certificate
// (`cast token cert`) stands for her token; plaintext gets nowhere.
func TestMTLSThroughRealProcesses(t *testing.T) {
	t.Parallel()
	r := newMTLSRig(t)
	refusedNode := func(p *testharness.Proc, want string) {
		t.Helper()
		if code, ok := p.Wait(30 * time.Second); !ok || code == 0 || !strings.Contains(p.Output(), want) {
			t.Errorf("node: exit %d (exited %v), want an error saying %q:\n%s", code, ok, want, p.Output())
		}
	}
	n0, _ := r.node("n0")
	refusedNode(n0, "has no credential")
	n0, _ = r.node("n0", "--join-token", "cast_not-a-join-token-0000000000000000000000000000")
	refusedNode(n0, "join token is unknown")

	// na joins ahead with `cast node join`, then starts with no token.
	joinOut, hint, code := r.admin.run("node", "token", "create", "--ttl", "5m")
	if code != 0 || !strings.Contains(hint, "--ca-pin "+r.pin) {
		t.Fatalf("cast node token create: exit %d; its hint does not give the CA pin: %s", code, hint)
	}
	joinA := strings.TrimSpace(joinOut)
	dirA := filepath.Join(r.dir, "node-na")
	r.cast().must("node", "join", "--join-token", joinA, "--ca-pin", r.pin, "--name", "na", "--data-dir", dirA)
	if _, errOut, code := r.cast().run("node", "join", "--join-token", joinA, "--ca-pin", r.pin, "--name", "nz", "--data-dir", t.TempDir()); code == 0 || !strings.Contains(errOut, "join token is unknown") {
		t.Errorf("a used join token joined again: exit %d, %s", code, errOut)
	}
	na, _ := r.node("na")
	joinB := strings.TrimSpace(r.admin.must("node", "token", "create", "--ttl", "5m"))
	nb, dirB := r.node("nb", "--join-token", joinB)
	r.admin.waitNode("na", true)
	r.admin.waitNode("nb", true)
	idA, idB := filepath.Join(dirA, client.NodeIdentityFile), filepath.Join(dirB, client.NodeIdentityFile)
	mode0600(t, idA)
	mode0600(t, idB)

	// With na's certificate (and no token), cast is node na, and may not
	// read nb's session.
	asA := r.cast("CAST_CLIENT_CERT=" + idA)
	if who := strings.TrimSpace(asA.must("token", "whoami")); who != "node:na" {
		t.Fatalf("whoami with na's certificate: %q", who)
	}
	var sess struct {
		ID string `json:"id"`
	}
	must(t, json.Unmarshal([]byte(r.admin.must("new", "--agent", "claude", "--node", "nb", "--json", "nb's work")), &sess))
	sessB := sess.ID
	if _, errOut, code := asA.run("read", sessB); code == 0 || !strings.Contains(errOut, "may not use session") {
		t.Errorf("na reads nb's session: exit %d, %s", code, errOut)
	}
	// Nor append as nb, fetch nb's credential, or take nb's stream (which
	// carries its owner tokens).
	c, err := client.Context{Addr: r.addr, CAPin: r.pin, Cert: idA}.Dial()
	must(t, err)
	defer c.Close()
	ctx := context.Background()
	_, err = c.Nodes.AppendOwnerMessages(ctx, &castv1.AppendOwnerMessagesRequest{SessionId: sessB, Node: "nb", OwnerToken: 1,
		Messages: []*castv1.Message{{Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "forged", ClientId: "f1"}}})
	wantReason(t, "na appends as nb", err, codes.PermissionDenied, "NODE_IDENTITY_MISMATCH")
	_, err = c.Nodes.FetchCredential(ctx, &castv1.FetchCredentialRequest{Node: "nb", Agent: "claude", Account: "a", Grant: "g"})
	wantReason(t, "na fetches nb's credential", err, codes.PermissionDenied, "NODE_IDENTITY_MISMATCH")
	stream, err := c.Nodes.Connect(ctx)
	if err == nil {
		if err = stream.Send(&castv1.ConnectRequest{Frame: &castv1.ConnectRequest_Hello{Hello: &castv1.Hello{Node: &castv1.Node{Name: "nb"}}}}); err == nil {
			_, err = stream.Recv()
		}
	}
	wantReason(t, "na connects as nb", err, codes.PermissionDenied, "NODE_IDENTITY_MISMATCH")

	// Another CA's certificate naming na is refused.
	foreign := r.cast("CAST_CLIENT_CERT=" + testharness.ForeignCert(t, pki.Identity{Role: "node", Name: "na", Cred: identityLeaf(t, idA).Subject.SerialNumber}))
	if _, errOut, code := foreign.run("token", "whoami"); code == 0 || !strings.Contains(errOut, "not issued by this control plane's CA") {
		t.Errorf("a foreign certificate: exit %d, %s", code, errOut)
	}
	// A copy of nb's certificate is refused once it expires, while nb
	// renews its own and stays up.
	old := filepath.Join(t.TempDir(), "old.pem")
	b, err := os.ReadFile(idB)
	must(t, err)
	must(t, os.WriteFile(old, b, 0o600))
	oldLeaf := identityLeaf(t, old)
	testharness.WaitFor(t, 30*time.Second, "nb's old certificate to expire after nb renewed", func() bool {
		return time.Now().After(oldLeaf.NotAfter) && renewals(nb) >= 2
	})
	if _, errOut, code := r.cast("CAST_CLIENT_CERT="+old).run("token", "whoami"); code == 0 || !strings.Contains(errOut, "expired") {
		t.Errorf("an expired certificate: exit %d, %s", code, errOut)
	}
	if who := strings.TrimSpace(r.cast("CAST_CLIENT_CERT="+idB).must("token", "whoami")); who != "node:nb" {
		t.Errorf("nb's renewed certificate: %q", who)
	}
	r.admin.waitNode("nb", true)
	// `cast node rm` of a stopped node revokes too: its certificate is
	// refused at once.
	if !nb.Stop(30 * time.Second) {
		t.Fatal("nb did not stop on SIGTERM")
	}
	r.admin.waitNode("nb", false)
	r.admin.must("node", "rm", "--force", "nb")
	if _, errOut, code := r.cast("CAST_CLIENT_CERT="+idB).run("token", "whoami"); code == 0 || !strings.Contains(errOut, "revoked") {
		t.Errorf("a removed node's certificate: exit %d, %s", code, errOut)
	}

	// Revocation refuses na's certificate at once and stops na.
	r.admin.must("node", "revoke", "na")
	if _, errOut, code := asA.run("token", "whoami"); code == 0 || !strings.Contains(errOut, "revoked") {
		t.Errorf("a revoked node's certificate: exit %d, %s", code, errOut)
	}
	if code, ok := na.Wait(30 * time.Second); !ok || code == 0 || !strings.Contains(na.Output(), "join again") {
		t.Errorf("revoked node: exit %d (exited %v):\n%s", code, ok, na.Output())
	}

	// A user's certificate: `cast token cert` puts it in alice's context
	// instead of her token; she is still only herself; removing her token
	// refuses it at once.
	aliceTok := strings.TrimSpace(r.admin.must("token", "create", "--role", "user", "--name", "alice"))
	aliceHome := t.TempDir()
	cfgPath := filepath.Join(aliceHome, ".config", "cast", "config.yaml")
	must(t, client.SetContext(cfgPath, "prod", client.Context{Addr: r.addr, Token: aliceTok, CA: r.caFile}))
	alice := cli{t: t, bin: r.admin.bin, env: append(append([]string{}, noHarnessAuth...), "CAST_INSECURE=", "HOME="+aliceHome, "XDG_CONFIG_HOME=", "CAST_ADDR=")}
	alice.must("token", "cert")
	mode0600(t, filepath.Join(aliceHome, ".config", "cast", "prod.pem"))
	if b, err := os.ReadFile(cfgPath); err != nil || strings.Contains(string(b), "token:") || !strings.Contains(string(b), "cert: ") {
		t.Errorf("alice's context after cast token cert (%v):\n%s", err, b)
	}
	if who := strings.TrimSpace(alice.must("token", "whoami")); who != "user:alice" {
		t.Errorf("whoami with alice's certificate: %q", who)
	}
	if _, errOut, code := alice.run("read", sessB); code == 0 || !strings.Contains(errOut, "may not use session") {
		t.Errorf("alice reads nb's session: exit %d, %s", code, errOut)
	}
	r.admin.must("token", "rm", "alice")
	if _, errOut, code := alice.run("token", "whoami"); code == 0 || !strings.Contains(errOut, "revoked") {
		t.Errorf("alice's certificate after her token was removed: exit %d, %s", code, errOut)
	}

	// Plaintext gets no answer from a TLS control plane.
	plain := cli{t: t, bin: r.admin.bin, env: append(append([]string{}, noHarnessAuth...), "CAST_ADDR="+r.addr)}
	if _, errOut, code := plain.run("nodes", "--timeout", "3s"); code == 0 {
		t.Errorf("plaintext cast reached the TLS control plane: %s", errOut)
	}
}

func wantReason(t *testing.T, what string, err error, code codes.Code, reason string) {
	t.Helper()
	if status.Code(err) != code || client.ReasonOf(err) != reason {
		t.Errorf("%s: got %v (reason %q), want %s %s", what, err, client.ReasonOf(err), code, reason)
	}
}
