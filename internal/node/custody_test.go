package node

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/agents/codex"
	"github.com/cast-dev/cast/internal/custody"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fsutil"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// custodyPlane is a control plane's Custody RPC on loopback that hands out
// each account's access token, as it stores them.
type custodyPlane struct {
	castv1.UnimplementedNodeServiceServer
	access map[string][]byte // account -> its access-only codex auth.json
}

func (p custodyPlane) Custody(_ context.Context, req *castv1.CustodyRequest) (*castv1.CustodyResponse, error) {
	return &castv1.CustodyResponse{Credential: p.access[req.Account]}, nil
}

// accessOnlyCodex is a ChatGPT auth.json without its refresh token, whose
// access token expires at exp.
func accessOnlyCodex(t *testing.T, access string, exp time.Time) []byte {
	t.Helper()
	claims, _ := json.Marshal(map[string]int64{"iat": exp.Add(-time.Hour).Unix(), "exp": exp.Unix()})
	jwt := "e30." + base64.RawURLEncoding.EncodeToString(claims) + ".sig-" + access
	login := fmt.Appendf(nil, `{"OPENAI_API_KEY":null,"tokens":{"id_token":"e30.e30.x","access_token":%q,"refresh_token":"rt","account_id":"a"},"last_refresh":%q}`,
		jwt, exp.Add(-time.Hour).UTC().Format(time.RFC3339))
	out, err := codex.Credential{}.AccessOnly(login)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// custodyDaemon is a node named x with token custody over Codex, whose
// control plane is nodes.
func custodyDaemon(t *testing.T, nodes castv1.NodeServiceServer) *Daemon {
	t.Helper()
	return fleetDaemon(t, nodes, true)
}

// fleetDaemon is custodyDaemon with token custody on or off.
func fleetDaemon(t *testing.T, nodes castv1.NodeServiceServer, tokenCustody bool) *Daemon {
	t.Helper()
	cfg := Config{Name: "x", DataDir: t.TempDir(), ControlPlane: serveNodes(t, nodes), Insecure: true,
		TokenCustody: tokenCustody, FleetAccounts: true, IsolatedHomes: true, CustodyInterval: 10 * time.Millisecond,
		ReconnectMin: 10 * time.Millisecond, ReconnectMax: 50 * time.Millisecond, ReadinessInterval: time.Second,
		Agents: map[string]AgentSetup{"codex": {Bin: agenttest.Bin(t, "codex"), Home: t.TempDir()}}}
	a, err := New(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.cli.Close() })
	return a
}

// A switch waiting for custody to refresh its expired login (account b,
// epoch 6) is not undone by an older SetCredential arriving after it (a
// on epoch 5: the one NodeHello read as the node connected, queued after
// the switch's broadcast). The older command passed the epoch check, as
// the node records an epoch only once its store holds a live token, so it
// dropped the waiting switch and wrote a's token: the node ran its turns
// on a while b was active, until the next switch.
func TestCustodyOlderSetCredentialKeepsAWaitingSwitch(t *testing.T) {
	now := time.Now()
	plane := custodyPlane{access: map[string][]byte{
		"a": accessOnlyCodex(t, "at-a", now.Add(time.Hour)),
		"b": accessOnlyCodex(t, "at-b", now.Add(-time.Minute)), // ran out while inactive
	}}
	a := custodyDaemon(t, plane)
	ctx := context.Background()
	for _, sc := range []*castv1.SetCredential{
		{Agent: "codex", Account: "b", Epoch: 6},
		{Agent: "codex", Account: "a", Epoch: 5},
	} {
		if err := a.setCredential(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}
	if got := a.st.fleet("codex"); got.Account == "a" {
		t.Fatalf("the older command's account was recorded: %+v", got)
	}
	if p := a.custodyAccount("codex"); p != "b" {
		t.Fatalf("custody keeps %q for codex, want the waiting switch's b", p)
	}
}

// reportPlane is a control plane's Custody RPC for a restarted node whose
// custody folder holds a refresh it never reported: another node is
// custodian now, and the first report comes before the node's stream is
// welcomed, so it is refused as the control plane refuses it then.
type reportPlane struct {
	castv1.UnimplementedNodeServiceServer
	access   []byte
	mu       sync.Mutex
	puts     int
	reported chan struct{} // closed when a report is taken
	elects   chan struct{} // one value per election asked for
}

func (p *reportPlane) Custody(_ context.Context, req *castv1.CustodyRequest) (*castv1.CustodyResponse, error) {
	switch req.Op {
	case castv1.CustodyOp_CUSTODY_OP_PUT:
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.puts++; p.puts == 1 {
			st, err := status.New(codes.FailedPrecondition, "node is not connected").WithDetails(&errdetails.ErrorInfo{Reason: errs.ReasonNodeNotConn})
			if err != nil {
				return nil, err
			}
			return nil, st.Err()
		}
		if p.puts == 2 {
			close(p.reported)
		}
	case castv1.CustodyOp_CUSTODY_OP_ELECT:
		p.elects <- struct{}{}
		return &castv1.CustodyResponse{Custodian: "y"}, nil
	case castv1.CustodyOp_CUSTODY_OP_ACCESS:
		return &castv1.CustodyResponse{Credential: p.access}, nil
	}
	return &castv1.CustodyResponse{}, nil
}

// A node that restarts with a refresh it never reported (it died between
// the provider's rotation and storing it) reports it once connected. Its
// custody loop starts beside the stream, so the first report was refused
// as NODE_NOT_CONNECTED and never tried again: with another node elected
// custodian meanwhile, this one never runs a refresh (which reports
// first), so its refresh record stayed, the custodian's refreshes were
// refused as REFRESH_IN_DOUBT, and the login's access token ran out
// fleet-wide.
func TestCustodyReportsALeftRefreshOnceConnected(t *testing.T) {
	plane := &reportPlane{access: accessOnlyCodex(t, "at-cx", time.Now().Add(time.Hour)),
		reported: make(chan struct{}), elects: make(chan struct{}, 64)}
	a := custodyDaemon(t, plane)
	left := filepath.Join(a.cfg.DataDir, "custody", "codex", "cx", "auth.json")
	if err := os.MkdirAll(filepath.Dir(left), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := fsutil.WriteFileAtomic(left, plane.access, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.st.setFleet("codex", fleetCred{Account: "cx", Epoch: 1}, func(map[string]*owned) {}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.custodyLoop(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	for elected := 0; ; {
		select {
		case <-plane.reported:
			return
		case <-plane.elects:
			if elected++; elected == 3 {
				t.Fatal("three custody rounds ran and the refresh left by the earlier run was never reported again")
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the custody loop did not run")
		}
	}
}

// flakyPlane is a control plane's Custody RPC whose first ACCESS for
// account b does not get through (a replica restarting, etcd electing).
// An account it has no access token for is one custody does not hold
// (an API key): FetchCredential hands out its stored file.
type flakyPlane struct {
	castv1.UnimplementedNodeServiceServer
	access map[string][]byte
	stored []byte
	mu     sync.Mutex
	failed bool
	// fetch: the first two FetchCredential of b fail (the switch's, then
	// the custody round's) instead of the first ACCESS.
	fetch   bool
	fetches int
	rounds  chan struct{} // one value per ACCESS or fetch: each custody round asks
}

func (p *flakyPlane) FetchCredential(_ context.Context, req *castv1.FetchCredentialRequest) (*castv1.FetchCredentialResponse, error) {
	p.rounds <- struct{}{}
	p.mu.Lock()
	defer p.mu.Unlock()
	if req.Account != "b" {
		return &castv1.FetchCredentialResponse{Credential: []byte(`{"OPENAI_API_KEY":"sk-a"}`)}, nil
	}
	if p.fetches++; p.fetch && p.fetches <= 2 {
		return nil, status.Error(codes.Unavailable, "store not answering")
	}
	return &castv1.FetchCredentialResponse{Credential: p.stored}, nil
}

func (p *flakyPlane) Custody(_ context.Context, req *castv1.CustodyRequest) (*castv1.CustodyResponse, error) {
	switch req.Op {
	case castv1.CustodyOp_CUSTODY_OP_ACCESS:
		p.rounds <- struct{}{}
		p.mu.Lock()
		defer p.mu.Unlock()
		if req.Account == "b" && !p.fetch && !p.failed {
			p.failed = true
			return nil, status.Error(codes.Unavailable, "store not answering")
		}
		if p.access[req.Account] == nil {
			st, err := status.New(codes.NotFound, "no login in custody").WithDetails(&errdetails.ErrorInfo{Reason: custody.ReasonNotInCustody})
			if err != nil {
				return nil, err
			}
			return nil, st.Err()
		}
		return &castv1.CustodyResponse{Credential: p.access[req.Account]}, nil
	case castv1.CustodyOp_CUSTODY_OP_ELECT:
		return &castv1.CustodyResponse{Custodian: "y"}, nil
	}
	return &castv1.CustodyResponse{}, nil
}

// A switch whose access token could not be fetched for a moment is made
// once custody answers again. The failure went back as the command's ack,
// which the control plane only logs and never sends again, so the node
// stayed on the old account (limited, for a switch on a limit) until it
// reconnected.
// The same holds for an account custody does not hold, whose stored
// file is copied then, and for such an account whose stored file could
// not be fetched for a moment (fetch), also on a node without token
// custody (custody=false), which copies every account.
func TestCustodySwitchOutlivesAFailedSupply(t *testing.T) {
	for _, tc := range []struct{ custody, held, fetch bool }{
		{true, true, false}, {true, false, false}, {true, false, true}, {false, false, true},
	} {
		t.Run(fmt.Sprintf("custody=%v/held=%v/fetch=%v", tc.custody, tc.held, tc.fetch), func(t *testing.T) {
			switchOutlivesAFailedSupply(t, tc.custody, tc.held, tc.fetch)
		})
	}
}

func switchOutlivesAFailedSupply(t *testing.T, tokenCustody, held, fetch bool) {
	now := time.Now()
	plane := &flakyPlane{access: map[string][]byte{"a": accessOnlyCodex(t, "at-a", now.Add(time.Hour))},
		stored: []byte(`{"OPENAI_API_KEY":"sk-b"}`), fetch: fetch, rounds: make(chan struct{}, 256)}
	if held {
		plane.access["b"] = accessOnlyCodex(t, "at-b", now.Add(time.Hour))
	}
	a := fleetDaemon(t, plane, tokenCustody)
	ctx, cancel := context.WithCancel(context.Background())
	if err := a.setCredential(ctx, &castv1.SetCredential{Agent: "codex", Account: "a", Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	_ = a.setCredential(ctx, &castv1.SetCredential{Agent: "codex", Account: "b", Epoch: 2}) // what it says is the ack's
	done := make(chan struct{})
	go func() { defer close(done); a.custodyLoop(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	for rounds := 0; a.st.fleet("codex").Account != "b"; {
		select {
		case <-plane.rounds:
			// A copy fetches holding custodyMu, which custodyAccount takes:
			// once it answers, the copy this fetch was for is recorded or
			// has failed (no further ask comes on a node without custody).
			a.custodyAccount("codex")
			// Each round asks twice (the round, then its supply): ten
			// asks are rounds enough, unless the last one just recorded it.
			if rounds++; rounds == 10 && a.st.fleet("codex").Account != "b" {
				t.Fatalf("custody rounds ran and the node still holds %+v", a.st.fleet("codex"))
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the node still holds %+v", a.st.fleet("codex"))
		}
	}
}
