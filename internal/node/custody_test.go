package node

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/agents/codex"
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
	cfg := Config{Name: "laptop", DataDir: t.TempDir(), ControlPlane: serveNodes(t, plane), Insecure: true,
		TokenCustody: true, FleetAccounts: true, IsolatedHomes: true, ReconnectMin: 10 * time.Millisecond, ReconnectMax: 50 * time.Millisecond, ReadinessInterval: time.Second,
		Agents: map[string]AgentSetup{"codex": {Bin: agenttest.Bin(t, "codex"), Home: t.TempDir()}}}
	a, err := New(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.cli.Close() })
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
