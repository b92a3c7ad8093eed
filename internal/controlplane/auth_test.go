package controlplane_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/secrets"
	"github.com/cast-dev/cast/internal/testharness"
)

// TestEveryRPCHasARule fails when a method of any cast.v1 service (from
// the generated descriptors) or of any service the server registers has
// no authorization rule, and when a rule names a method that is gone.
func TestEveryRPCHasARule(t *testing.T) {
	t.Parallel()
	srv := testharness.StartControlPlane(t, nil)
	want := map[string]bool{}
	protoregistry.GlobalFiles.RangeFilesByPackage("cast.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := range fd.Services().Len() {
			sd := fd.Services().Get(i)
			for j := range sd.Methods().Len() {
				want["/"+string(sd.FullName())+"/"+string(sd.Methods().Get(j).Name())] = true
			}
		}
		return true
	})
	for name, info := range srv.ServiceInfo() {
		for _, m := range info.Methods {
			want["/"+name+"/"+m.Name] = true
		}
	}
	if len(want) < 40 {
		t.Fatalf("found only %d methods; the descriptors did not load", len(want))
	}
	for m := range want {
		if _, err := srv.Policy().Rule(m); err != nil {
			t.Errorf("%s has no authorization rule", m)
		}
	}
	for m := range srv.Policy() {
		if !want[m] {
			t.Errorf("rule for %s, which no service has", m)
		}
	}
}

func wantDenied(t *testing.T, what string, err error, code codes.Code, reason string) {
	t.Helper()
	if status.Code(err) != code || client.ReasonOf(err) != reason {
		t.Errorf("%s: got %v (reason %q), want %s %s", what, err, client.ReasonOf(err), code, reason)
	}
}

// authEnv is a control plane with node n1 joined through a join token,
// and user tokens for alice and bob.
type authEnv struct {
	addr                string
	metrics             string // the control plane's /metrics address
	admin, alice, bob   *client.Client
	n1                  *client.Client // n1's own credential
	aliceSess, adminSes *castv1.Session
}

func newAuthEnv(t *testing.T, cb func(*controlplane.Config)) *authEnv {
	srv := testharness.StartControlPlane(t, cb)
	e := &authEnv{addr: srv.Addr(), metrics: srv.MetricsAddr(), admin: testharness.Dial(t, srv.Addr())}
	ctx := ctxT(t)
	join, err := e.admin.Auth.CreateJoinToken(ctx, &castv1.CreateJoinTokenRequest{TtlSeconds: 60})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "n1")
	testharness.StartNode(t, e.addr, "n1", func(c *node.Config) { c.JoinToken, c.DataDir = join.Token, dir })
	waitConnected(t, e.admin, "n1", true)
	// A join token for two nodes works twice, then never again.
	two, err := e.admin.Auth.CreateJoinToken(ctx, &castv1.CreateJoinTokenRequest{TtlSeconds: 60, Uses: 2})
	if err != nil {
		t.Fatal(err)
	}
	anon := testharness.DialAs(t, e.addr, "")
	for _, n := range []string{"k0", "k1", "k2"} {
		_, err := anon.Auth.JoinNode(ctx, &castv1.JoinNodeRequest{Name: n, JoinToken: two.Token})
		if n == "k2" {
			wantDenied(t, "third use of a two-use join token", err, codes.Unauthenticated, errs.ReasonJoinToken)
		} else if err != nil {
			t.Errorf("join %s: %v", n, err)
		}
	}
	// The join token was used once; it never works again.
	_, err = testharness.DialAs(t, e.addr, "").Auth.JoinNode(ctx, &castv1.JoinNodeRequest{Name: "n9", JoinToken: join.Token})
	wantDenied(t, "reused join token", err, codes.Unauthenticated, errs.ReasonJoinToken)
	// The node keeps its own credential 0600 in its data dir.
	fi, err := os.Stat(filepath.Join(dir, node.CredentialFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("node credential file: %v %v", fi, err)
	}
	cred, err := secrets.ReadToken(filepath.Join(dir, node.CredentialFile))
	if err != nil {
		t.Fatal(err)
	}
	e.n1 = testharness.DialAs(t, e.addr, cred)
	e.alice, e.bob = e.user(t, "alice"), e.user(t, "bob")
	if e.aliceSess, err = e.alice.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp"}); err != nil {
		t.Fatal(err)
	}
	if e.aliceSess.Creator != "user:alice" {
		t.Fatalf("creator %q", e.aliceSess.Creator)
	}
	if e.adminSes, err = e.admin.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp"}); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *authEnv) user(t *testing.T, name string) *client.Client {
	resp, err := e.admin.Auth.CreateToken(ctxT(t), &castv1.CreateTokenRequest{Name: name, Role: castv1.Role_ROLE_USER})
	if err != nil {
		t.Fatal(err)
	}
	return testharness.DialAs(t, e.addr, resp.Token)
}

// TestUserSessionCheckReadsASessionOnce: a user's calls on their own
// session read its record (an etcd txn) once to learn its creator, not on
// every call (an append's included), and the check still refuses everyone
// else, before and after.
func TestUserSessionCheckReadsASessionOnce(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t, nil)
	ctx := ctxT(t)
	appendAs := func(c *client.Client) error {
		_, err := c.Sessions.AppendMessages(ctx, &castv1.AppendMessagesRequest{SessionId: e.aliceSess.Id,
			Messages: []*castv1.Message{{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Agent: "claude", Text: "x"}}})
		return err
	}
	wantDenied(t, "bob appends to alice's session", appendAs(e.bob), codes.PermissionDenied, errs.ReasonNotYourSession)
	if err := appendAs(e.alice); err != nil {
		t.Fatal(err)
	}
	const calls = 20
	before := sessionReads(t, e.metrics)
	for range calls {
		if err := appendAs(e.alice); err != nil {
			t.Fatal(err)
		}
	}
	// Other readers (the dispatcher, on an owner change) may read it too,
	// but not once a call.
	if n := sessionReads(t, e.metrics) - before; n >= calls/2 {
		t.Errorf("%d appends by the session's creator read the session %v times", calls, n)
	}
	wantDenied(t, "bob appends to alice's session after her calls", appendAs(e.bob), codes.PermissionDenied, errs.ReasonNotYourSession)
	_, err := e.bob.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: e.aliceSess.Id})
	wantDenied(t, "bob reads alice's session after her calls", err, codes.PermissionDenied, errs.ReasonNotYourSession)
}

// sessionReads is how many times the control plane's store read a session
// record, from its /metrics.
func sessionReads(t *testing.T, metrics string) float64 {
	t.Helper()
	return storeCalls(t, metrics, "get_session")
}

// storeCalls is how many times the control plane's store did op, from its
// /metrics.
func storeCalls(t *testing.T, metrics, op string) float64 {
	t.Helper()
	for _, line := range strings.Split(string(httpGet(t, "http://"+metrics+"/metrics")), "\n") {
		if v, ok := strings.CutPrefix(line, `cast_store_request_duration_seconds_count{op="`+op+`"} `); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s count in /metrics", op)
	return 0
}

func TestAuthRefusals(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t, nil)
	ctx := ctxT(t)
	anon := testharness.DialAs(t, e.addr, "")
	forged := testharness.DialAs(t, e.addr, "cast_0000000000000000000000000000000000000000000000000000000000000000")

	_, err := anon.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: e.aliceSess.Id})
	wantDenied(t, "no token", err, codes.Unauthenticated, errs.ReasonUnauthenticated)
	_, err = forged.Sessions.ListSessions(ctx, &castv1.ListSessionsRequest{})
	wantDenied(t, "unknown token", err, codes.Unauthenticated, errs.ReasonUnauthenticated)
	// Without --oidc-issuer an ID token is refused, saying why.
	_, err = testharness.DialAs(t, e.addr, "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln").Sessions.ListSessions(ctx, &castv1.ListSessionsRequest{})
	wantDenied(t, "an ID token without OIDC", err, codes.Unauthenticated, errs.ReasonUnauthenticated)
	if !strings.Contains(status.Convert(err).Message(), "trusts no OIDC issuer") {
		t.Errorf("an ID token without OIDC: %v", err)
	}
	_, err = anon.Nodes.FetchCredential(ctx, &castv1.FetchCredentialRequest{Node: "n1", Agent: "claude", Account: "a", Grant: "g"})
	wantDenied(t, "anonymous credential fetch", err, codes.Unauthenticated, errs.ReasonUnauthenticated)

	// Users: only their own sessions; nothing of accounts or tokens.
	_, err = e.bob.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: e.aliceSess.Id})
	wantDenied(t, "bob reads alice's session", err, codes.PermissionDenied, errs.ReasonNotYourSession)
	_, err = e.bob.Sessions.ListMessages(ctx, &castv1.ListMessagesRequest{SessionId: e.aliceSess.Id})
	wantDenied(t, "bob reads alice's messages", err, codes.PermissionDenied, errs.ReasonNotYourSession)
	_, err = e.bob.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: e.aliceSess.Id, Text: "hi"})
	wantDenied(t, "bob prompts alice's session", err, codes.PermissionDenied, errs.ReasonNotYourSession)
	// A server stream's one request is checked too (the check is let go after it).
	wantDenied(t, "bob watches alice's session", watchErr(ctx, e.bob, e.aliceSess.Id), codes.PermissionDenied, errs.ReasonNotYourSession)
	_, err = e.alice.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: e.adminSes.Id})
	wantDenied(t, "alice reads the admin's session", err, codes.PermissionDenied, errs.ReasonNotYourSession)
	if _, err := e.alice.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: e.aliceSess.Id}); err != nil {
		t.Errorf("alice reads her own session: %v", err)
	}
	list, err := e.bob.Sessions.ListSessions(ctx, &castv1.ListSessionsRequest{})
	if err != nil || len(list.Sessions) != 0 {
		t.Errorf("bob lists %v, %v; want none", list.GetSessions(), err)
	}
	_, err = e.bob.Migrations.StartMigration(ctx, &castv1.StartMigrationRequest{To: "n1", SessionIds: []string{e.aliceSess.Id}})
	wantDenied(t, "bob moves alice's session", err, codes.PermissionDenied, errs.ReasonNotYourSession)
	_, err = e.alice.Migrations.StartMigration(ctx, &castv1.StartMigrationRequest{To: "n1", FromNode: "n1"})
	wantDenied(t, "alice drains a node", err, codes.PermissionDenied, errs.ReasonPermissionDenied)
	for what, call := range map[string]func() error{
		"put account": func() error {
			_, err := e.alice.Accounts.PutAccount(ctx, &castv1.PutAccountRequest{Name: "x", Agent: "claude", Credential: []byte("{}")})
			return err
		},
		"list accounts": func() error { _, err := e.alice.Accounts.ListAccounts(ctx, &castv1.ListAccountsRequest{}); return err },
		"use account": func() error {
			_, err := e.alice.Accounts.UseAccount(ctx, &castv1.UseAccountRequest{Name: "x", Agent: "claude"})
			return err
		},
		"create token": func() error {
			_, err := e.alice.Auth.CreateToken(ctx, &castv1.CreateTokenRequest{Name: "eve", Role: castv1.Role_ROLE_ADMIN})
			return err
		},
		"join token": func() error {
			_, err := e.alice.Auth.CreateJoinToken(ctx, &castv1.CreateJoinTokenRequest{})
			return err
		},
		"revoke node": func() error {
			_, err := e.alice.Auth.RevokeNode(ctx, &castv1.RevokeNodeRequest{Name: "n1"})
			return err
		},
		"node account": func() error { _, err := e.n1.Accounts.ListAccounts(ctx, &castv1.ListAccountsRequest{}); return err },
		"act as node": func() error {
			_, err := e.alice.Nodes.ReportTurn(ctx, &castv1.ReportTurnRequest{SessionId: e.aliceSess.Id, Node: "n1", OwnerToken: 1})
			return err
		},
	} {
		wantDenied(t, "non-admin "+what, call(), codes.PermissionDenied, errs.ReasonPermissionDenied)
	}
	if who, err := e.alice.Auth.WhoAmI(ctx, &castv1.WhoAmIRequest{}); err != nil || who.Principal != "user:alice" {
		t.Errorf("whoami %v %v", who, err)
	}
}

// TestNodeActsOnlyAsItself: n1's credential cannot speak for n2 (connect,
// append, report, fetch a credential), nor read n2's sessions; n2's owner
// token never leaves the control plane; revoking n1 works at once.
func TestNodeActsOnlyAsItself(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t, nil)
	ctx := ctxT(t)
	testharness.StartNode(t, e.addr, "n2", nil)
	waitConnected(t, e.admin, "n2", true)
	s2, err := e.admin.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp", Node: "n2"})
	if err != nil {
		t.Fatal(err)
	}
	mismatch := func(what string, err error) {
		t.Helper()
		wantDenied(t, what, err, codes.PermissionDenied, errs.ReasonNodeMismatch)
	}
	_, err = e.n1.Nodes.AppendOwnerMessages(ctx, &castv1.AppendOwnerMessagesRequest{SessionId: s2.Id, Node: "n2", OwnerToken: 1,
		Messages: []*castv1.Message{{Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "forged", ClientId: "c1"}}})
	mismatch("n1 appends as n2", err)
	_, err = e.n1.Nodes.ReportTurn(ctx, &castv1.ReportTurnRequest{SessionId: s2.Id, Node: "n2", OwnerToken: 1})
	mismatch("n1 reports n2's turn", err)
	_, err = e.n1.Nodes.FetchCredential(ctx, &castv1.FetchCredentialRequest{Node: "n2", Agent: "claude", Account: "a", Grant: "g"})
	mismatch("n1 fetches n2's credential", err)
	_, err = e.n1.Nodes.ProbeNode(ctx, &castv1.ProbeNodeRequest{Node: "n2"})
	mismatch("n1 asks n2 to probe its agents", err)
	origin := &castv1.SessionOrigin{Agent: "claude", NativeId: "x1", Path: "/home/u/.claude/projects/p/x1.jsonl"}
	forged := []*castv1.Message{{Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: "forged", ClientId: "adopt.f.1"}}
	_, err = e.n1.Nodes.AdoptSession(ctx, &castv1.AdoptSessionRequest{Node: "n2", Origin: origin, Cwd: "/tmp", Messages: forged})
	mismatch("n1 adopts as n2", err)
	// As itself, n1 adds only to a session adopted from that native
	// session, or one it owns: not to n2's.
	_, err = e.n1.Nodes.AdoptSession(ctx, &castv1.AdoptSessionRequest{Node: "n1", Origin: origin, SessionId: s2.Id, Messages: forged})
	mismatch("n1 adopts into n2's session", err)
	_, err = e.alice.Nodes.ProbeNode(ctx, &castv1.ProbeNodeRequest{Node: "n2"})
	wantDenied(t, "a user asks a node to probe its agents", err, codes.PermissionDenied, errs.ReasonPermissionDenied)
	stream, err := e.n1.Nodes.Connect(ctx)
	if err == nil {
		err = stream.Send(&castv1.ConnectRequest{Frame: &castv1.ConnectRequest_Hello{Hello: &castv1.Hello{Node: &castv1.Node{Name: "n2"}}}})
		if err == nil {
			_, err = stream.Recv()
		}
	}
	mismatch("n1 connects as n2", err)
	// As itself, n1 still cannot write n2's session: the store's owner
	// guard holds (and n1 never learns n2's token).
	_, err = e.n1.Nodes.AppendOwnerMessages(ctx, &castv1.AppendOwnerMessagesRequest{SessionId: s2.Id, Node: "n1", OwnerToken: 1,
		Messages: []*castv1.Message{{Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "forged", ClientId: "c2"}}})
	if status.Code(err) != codes.FailedPrecondition || client.ReasonOf(err) != errs.ReasonNotOwner {
		t.Errorf("n1 appends to n2's session as itself: %v", err)
	}
	_, err = e.n1.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: s2.Id})
	wantDenied(t, "n1 reads n2's session", err, codes.PermissionDenied, errs.ReasonNotYourSession)
	_, err = e.n1.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp"})
	wantDenied(t, "a node creates a top-level session", err, codes.PermissionDenied, errs.ReasonPermissionDenied)

	// Owner tokens never leave the control plane.
	mig, err := e.admin.Migrations.StartMigration(ctx, &castv1.StartMigrationRequest{To: "n1", SessionIds: []string{s2.Id}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.admin.Migrations.GetMigration(ctx, &castv1.GetMigrationRequest{Id: mig.Id})
	if err != nil {
		t.Fatal(err)
	}
	for _, ms := range append(got.Sessions, mig.Sessions...) {
		if ms.SourceToken != 0 {
			t.Errorf("migration reply carries owner token %d", ms.SourceToken)
		}
	}

	// Revocation: n1's very next call is refused, and it is marked down.
	if _, err := e.n1.Nodes.ListNodes(ctx, &castv1.ListNodesRequest{}); err != nil {
		t.Fatal(err)
	}
	if r, err := e.admin.Auth.RevokeNode(ctx, &castv1.RevokeNodeRequest{Name: "n1"}); err != nil || !r.Revoked {
		t.Fatalf("revoke: %v %v", r, err)
	}
	_, err = e.n1.Nodes.ListNodes(ctx, &castv1.ListNodesRequest{})
	wantDenied(t, "revoked credential", err, codes.Unauthenticated, errs.ReasonUnauthenticated)
	waitConnected(t, e.admin, "n1", false)
}

// A user over its rate or stream limit gets RESOURCE_EXHAUSTED with a
// reason; other users, nodes and admins are not held back by it.
func TestUserLimits(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t, func(c *controlplane.Config) { c.Limits.Streams = 1 })
	ctx := ctxT(t)
	w1, err := e.alice.Sessions.WatchSession(ctx, &castv1.WatchSessionRequest{SessionId: e.aliceSess.Id})
	if err == nil {
		_, err = w1.Recv() // the session comes first: the stream is open
	}
	if err != nil {
		t.Fatal(err)
	}
	w2, err := e.alice.Sessions.WatchSession(ctx, &castv1.WatchSessionRequest{SessionId: e.aliceSess.Id})
	if err == nil {
		_, err = w2.Recv()
	}
	wantDenied(t, "second watch", err, codes.ResourceExhausted, authz.ReasonTooManyStreams)
	w3, err := e.admin.Sessions.WatchSession(ctx, &castv1.WatchSessionRequest{SessionId: e.aliceSess.Id})
	if err == nil {
		_, err = w3.Recv()
	}
	if err != nil {
		t.Errorf("the admin's watch: %v", err)
	}

	r := newAuthEnv(t, func(c *controlplane.Config) {
		c.Limits = authz.Limits{Rate: 0.001, Burst: 5, Streams: 8, AppendBytes: 1, AppendBurst: 1 << 20}
		c.Store.MaxMessageBytes, c.MaxRecvBytes = 1<<20, 1<<20
	})
	var last error
	for range 6 {
		_, last = r.bob.Sessions.ListSessions(ctx, &castv1.ListSessionsRequest{})
	}
	wantDenied(t, "bob over his rate", last, codes.ResourceExhausted, authz.ReasonRateLimited)
	if _, err := r.alice.Sessions.ListSessions(ctx, &castv1.ListSessionsRequest{}); err != nil {
		t.Errorf("alice pays for bob: %v", err)
	}
	big := strings.Repeat("x", 600<<10)
	_, err = r.alice.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: r.aliceSess.Id, Text: big})
	if err != nil {
		t.Fatalf("alice's first 600 KiB: %v", err)
	}
	_, err = r.alice.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: r.aliceSess.Id, Text: big})
	wantDenied(t, "alice's second 600 KiB in a second", err, codes.ResourceExhausted, authz.ReasonAppendLimited)
}

// A join token's lifetime out of range is refused whatever its size: one
// so large that it wraps around in nanoseconds (to an hour, or to less
// than nothing) is not taken for another lifetime.
func TestJoinTokenLifetimeOutOfRange(t *testing.T) {
	srv := testharness.StartControlPlane(t, nil)
	ctx, admin := ctxT(t), testharness.Dial(t, srv.Addr())
	for _, ttl := range []int64{-1, int64(controlplane.MaxJoinTTL.Seconds()) + 1, 3600 + 1<<55, math.MaxInt64} {
		resp, err := admin.Auth.CreateJoinToken(ctx, &castv1.CreateJoinTokenRequest{TtlSeconds: ttl})
		wantDenied(t, fmt.Sprintf("ttl_seconds %d (token until %s)", ttl, resp.GetExpireTime().AsTime()), err, codes.InvalidArgument, errs.ReasonInvalidArgument)
	}
}

// A user sees and cancels only migrations of its own sessions. One whose
// sessions are all gone (purged since it moved them: an admin's drain of
// other people's sessions, say) is nobody's in particular, so it is not
// every user's: it stays an admin's.
func TestMigrationOfGoneSessionsIsNotEveryUsers(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) { c.EtcdEndpoints, c.DataDir = []string{ep}, "" })
	ctx := ctxT(t)
	st := testharness.OpenStore(t, ep, nil)
	m := &castv1.Migration{Id: "m" + strings.ToLower(ids.NewClientID()), Target: "n2", TargetNode: "n2",
		State: castv1.MigrationState_MIGRATION_STATE_SUCCEEDED, CreateTime: timestamppb.Now(),
		Sessions: []*castv1.MigrationSession{{SessionId: ids.NewSessionID(), SourceNode: "n1",
			State: castv1.MigrationState_MIGRATION_STATE_SUCCEEDED}}}
	_, _, err := st.CreateMigration(ctx, m, "")
	must(t, err)

	admin := testharness.Dial(t, srv.Addr())
	tok, err := admin.Migrations.ListMigrations(ctx, &castv1.ListMigrationsRequest{})
	if err != nil || len(tok.Migrations) != 1 {
		t.Fatalf("the admin's list: %v %v", tok, err)
	}
	alice, err := admin.Auth.CreateToken(ctx, &castv1.CreateTokenRequest{Name: "alice", Role: castv1.Role_ROLE_USER})
	must(t, err)
	asAlice := testharness.DialAs(t, srv.Addr(), alice.Token)
	list, err := asAlice.Migrations.ListMigrations(ctx, &castv1.ListMigrationsRequest{})
	must(t, err)
	if len(list.Migrations) != 0 {
		t.Errorf("alice lists a migration of sessions that were never hers: %v", list.Migrations)
	}
	_, err = asAlice.Migrations.GetMigration(ctx, &castv1.GetMigrationRequest{Id: m.Id})
	wantDenied(t, "alice reads it", err, codes.PermissionDenied, errs.ReasonNotYourSession)
	_, err = asAlice.Migrations.CancelMigration(ctx, &castv1.CancelMigrationRequest{Id: m.Id})
	wantDenied(t, "alice cancels it", err, codes.PermissionDenied, errs.ReasonNotYourSession)
}
