package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/controlplane"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/fleet"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// Fleet accounts with the real claude: the node writes the active account
// into claude's shared .credentials.json (0600); when the fake provider
// puts that account over its usage limit, the turn parks, the control plane
// switches the fleet to the other account, the node rewrites the store and
// the parked turn runs again on the new credential: answered once, with an
// account_switch notice in the thread. When every account is limited the
// session waits, and runs on the first account whose window opens again.
// No secret shows in the CLI's output or the node's logs.
func TestFleetAccountAutoSwitch(t *testing.T) {
	t.Parallel()
	const cooldown = 12 * time.Second
	r, c, outs := newFleetRig(t, cooldown)
	tokA, tokB := fleetTokA, fleetTokB
	if _, errOut, code := c.run("account", "add", "bad", "--agent", "claude", "--credentials", credFile(t, "")); code == 0 || !strings.Contains(errOut, "accessToken") {
		t.Fatalf("an empty credential was accepted: exit %d %q", code, errOut)
	}
	store := filepath.Join(r.homes["claude"], ".claude", ".credentials.json")
	if fi, _ := os.Stat(store); fi.Mode().Perm() != 0o600 {
		t.Fatalf("credential store mode %v", fi.Mode().Perm())
	}

	ctx := context.Background()
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Text: "first MARK-F1"})
	must(t, err)
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	if tok := bearerOf(r, "MARK-F1"); tok != tokA {
		t.Fatalf("first turn sent with %q, want account A", tok)
	}

	// A hits its usage limit: the turn runs again on B.
	r.fake.RejectCredential(tokA, 429)
	seq := r.send(sess.Id, "second MARK-F2")
	waitAnswered(r, sess.Id, "MARK-F2", seq)
	if tok := bearerOf(r, "MARK-F2"); tok != tokB {
		t.Fatalf("the parked turn ran again with %q, want account B", tok)
	}
	waitSwitchNotice(t, r, sess.Id, "Now using account work-b (was work-a")
	accounts := listAccounts(t, c)
	if !accounts["work-b"].Active || accounts["work-a"].Active || accounts["work-a"].LimitedUntil == "" || accounts["work-a"].Switches != "1" {
		t.Fatalf("accounts after the switch: %+v", accounts)
	}

	// B too: nothing has room, the session waits parked; A's window
	// reopens after the cooldown and the turn runs on A.
	r.fake.RejectCredential(tokB, 429)
	r.fake.RejectCredential(tokA, 0)
	seq = r.send(sess.Id, "third MARK-F3")
	waitAnswered(r, sess.Id, "MARK-F3", seq)
	if tok := bearerOf(r, "MARK-F3"); tok != tokA {
		t.Fatalf("after the reset the turn ran with %q, want account A", tok)
	}
	if accounts := listAccounts(t, c); !accounts["work-a"].Active {
		t.Fatalf("account A not active after its reset: %+v", accounts)
	}

	// Secrets never show: not in the CLI's output, not in the node's log.
	outs += c.must("account", "ls", "--json") + c.must("account", "ls")
	for _, tok := range []string{tokA, tokB, "FLEET-A", "FLEET-B"} {
		if strings.Contains(outs, tok) || strings.Contains(r.node.Output(), tok) {
			t.Fatalf("secret %q shown in CLI output or node log", tok)
		}
	}
	// The active account cannot be removed; another can.
	if _, errOut, code := c.run("account", "rm", "work-a", "--agent", "claude"); code == 0 || !strings.Contains(errOut, "active") {
		t.Fatalf("rm of the active account: exit %d %q", code, errOut)
	}
	c.must("account", "rm", "work-b", "--agent", "claude")
}

// waitAnswered waits until the session is idle with exactly one answer to
// the turn holding marker, and the marker's message stored once.
func waitAnswered(r *turnRig, id, marker string, seq int64) {
	r.t.Helper()
	// Idle with an answer after seq: a row after seq alone is not enough,
	// since an account_switch notice may land there before the turn starts.
	testharness.WaitFor(r.t, 3*time.Minute, fmt.Sprintf("an answer after seq %d", seq), func() bool {
		sess, err := r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{Id: id})
		if err != nil || sess.State != castv1.SessionState_SESSION_STATE_IDLE {
			return false
		}
		return slices.ContainsFunc(r.messages(id), func(m *castv1.Message) bool {
			return m.Kind == castv1.MessageKind_MESSAGE_KIND_ASSISTANT && m.Seq > seq
		})
	})
	prompts, answers := 0, 0
	for _, m := range r.messages(id) {
		switch {
		case m.Kind == castv1.MessageKind_MESSAGE_KIND_USER && strings.Contains(m.Text, marker):
			prompts++
		case m.Kind == castv1.MessageKind_MESSAGE_KIND_ASSISTANT && m.Seq > seq:
			answers++
		}
	}
	if prompts != 1 || answers != 1 {
		r.t.Fatalf("%s: %d prompts and %d answers stored, want 1 and 1", marker, prompts, answers)
	}
}

// lastSwitchNotice is the text of the session's newest account_switch notice.
func lastSwitchNotice(r *turnRig, id string) string {
	notice := ""
	for _, m := range r.messages(id) {
		if m.NoticeType == "account_switch" {
			notice = m.Text
		}
	}
	return notice
}

// waitSwitchNotice waits until id's last account_switch notice holds want:
// the fleet draws it after it activated the next account, and a turn on
// that account can end first on a loaded machine.
func waitSwitchNotice(t *testing.T, r *turnRig, id, want string) {
	t.Helper()
	testharness.WaitFor(t, 30*time.Second, "an account_switch notice holding "+want, func() bool {
		return strings.Contains(lastSwitchNotice(r, id), want)
	})
}

// bearerOf is the OAuth token of the last successful turn whose request
// carried marker.
func bearerOf(r *turnRig, marker string) string { return bearerOfAny(r.fake, marker) }

type accountJSON struct {
	Name         string `json:"name"`
	Active       bool   `json:"active"`
	LimitedUntil string `json:"limited_until"`
	Switches     string `json:"switches"`
}

func listAccounts(t *testing.T, c cli) map[string]accountJSON {
	t.Helper()
	var v struct{ Accounts []accountJSON }
	must(t, json.Unmarshal([]byte(c.must("account", "ls", "--json")), &v))
	out := map[string]accountJSON{}
	for _, a := range v.Accounts {
		out[a.Name] = a
	}
	return out
}

const fleetTokA, fleetTokB = "sk-ant-oat01-FLEET-A-secret", "sk-ant-oat01-FLEET-B-secret"

// newFleetRig is a claude node reading its shared credential store (no API
// key in its env), with accounts work-a (active, written by the node) and
// work-b. It returns what the CLI printed while adding them.
func newFleetRig(t *testing.T, cooldown time.Duration, nodeEnv ...string) (*turnRig, cli, string) {
	return newFleetRigWith(t, func(c *controlplane.Config) { c.Fleet.Cooldown = cooldown }, nodeEnv...)
}

// newFleetRigWith is newFleetRig with cb changing the control plane's
// config (its fleet sweeps every 300ms).
func newFleetRigWith(t *testing.T, cb func(*controlplane.Config), nodeEnv ...string) (*turnRig, cli, string) {
	return newFleetRigAgents(t, cb, []string{"claude"}, nodeEnv...)
}

// newFleetRigAgents is newFleetRigWith with the node running agentNames
// (claude among them; only claude reads the fleet's store).
func newFleetRigAgents(t *testing.T, cb func(*controlplane.Config), agentNames []string, nodeEnv ...string) (*turnRig, cli, string) {
	r := newTurnRigWith(t, func(c *controlplane.Config, _ string) {
		c.Fleet.Sweep = 300 * time.Millisecond
		cb(c)
	}, agentNames...)
	editAgentSetup(t, r, "claude", func(setup map[string]any) {
		var env []string
		for _, kv := range setup["env"].([]any) {
			if !strings.HasPrefix(kv.(string), "ANTHROPIC_API_KEY=") {
				env = append(env, kv.(string))
			}
		}
		setup["env"] = env
	})
	r.node.Kill()
	markCustodian(t, r, "worker")
	r.startNodeEnv(nodeEnv...)

	c := castCLI(t, r)
	outs := addAccount(c, "claude", "work-a", claudeLogin(fleetTokA))
	outs += addAccount(c, "claude", "work-b", claudeLogin(fleetTokB), "--json")
	waitStore(t, r, "claude", fleetTokA)
	return r, c, outs
}

// castCLI is the cast CLI talking to r's control plane (trusting its CA
// when it serves TLS).
func castCLI(t *testing.T, r *turnRig) cli {
	c := cli{t: t, bin: filepath.Join(testharness.Binaries(t), "cast"), env: []string{"CAST_ADDR=" + r.addr}}
	if r.caFile != "" {
		c.env = append(c.env, "CAST_CACERT="+r.caFile)
	}
	return c
}

// editAgentSetup changes agent's entry of r's node agents config
// (--agents-config) with edit; the node reads it when it next starts.
func editAgentSetup(t *testing.T, r *turnRig, agent string, edit func(setup map[string]any)) {
	editAgentsConfig(t, r.nodeArgs[indexOf(r.nodeArgs, "--agents-config")+1], agent, edit)
}

// editAgentsConfig changes agent's entry of the agents config at cfgPath
// with edit.
func editAgentsConfig(t *testing.T, cfgPath, agent string, edit func(setup map[string]any)) {
	var setups map[string]map[string]any
	b, err := os.ReadFile(cfgPath)
	must(t, err)
	must(t, json.Unmarshal(b, &setups))
	edit(setups[agent])
	b, err = json.Marshal(setups)
	must(t, err)
	must(t, os.WriteFile(cfgPath, b, 0o600))
}

// addAccount adds login (the content of agent's credential file) as fleet
// account name with `cast account add` and more args, and returns what
// the CLI printed.
func addAccount(c cli, agent, name, login string, args ...string) string {
	return c.must(append([]string{"account", "add", name, "--agent", agent, "--credentials", loginFile(c.t, login)}, args...)...)
}

// waitStore waits until r's node wrote a login holding secret into
// agent's shared credential store (what the active account does).
func waitStore(t *testing.T, r *turnRig, agent, secret string) {
	t.Helper()
	a, _ := agents.Lookup(agent)
	store := filepath.Join(agenttest.NativeHome(r.homes[agent], agent), a.Login.Fleet.File)
	testharness.WaitFor(t, 30*time.Second, "the node wrote the account into "+store, func() bool {
		b, err := os.ReadFile(store)
		return err == nil && strings.Contains(string(b), secret)
	})
}

// loginFile is a credential file holding login.
func loginFile(t *testing.T, login string) string {
	p := filepath.Join(t.TempDir(), "login.json")
	must(t, os.WriteFile(p, []byte(login), 0o600))
	return p
}

// claudeLogin is a Claude Max login with access token tok, valid for a day.
func claudeLogin(tok string) string {
	return fmt.Sprintf(`{"claudeAiOauth":{"accessToken":%q,"refreshToken":"r","expiresAt":%d,"scopes":["user:inference"],"subscriptionType":"max"}}`,
		tok, time.Now().Add(24*time.Hour).UnixMilli())
}

// credFile is a Claude login file with access token tok.
func credFile(t *testing.T, tok string) string { return loginFile(t, claudeLogin(tok)) }

// claudeWindow makes the fake provider report with every answer that the
// 5-hour window is used (a fraction: "0.96") past threshold, resetting at
// reset, with a warning status (claude passes usage on only then).
func claudeWindow(r *turnRig, used, threshold string, reset time.Time) {
	for k, v := range map[string]string{
		"status": "allowed_warning", "5h-utilization": used, "5h-reset": fmt.Sprint(reset.Unix()),
		"5h-surpassed-threshold": threshold, "representative-claim": "five_hour", "reset": fmt.Sprint(reset.Unix()),
	} {
		r.fake.SetHeader("anthropic-ratelimit-unified-"+k, v)
	}
}

// The node dies (kill -9) after writing the new account into the store but
// before recording it: restarted, it takes the same activation again when
// it connects and runs the parked turn, which is answered once, on B.
func TestFleetSwitchSurvivesNodeCrash(t *testing.T) {
	t.Parallel()
	r, _, _ := newFleetRig(t, time.Hour)
	ctx := context.Background()
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Text: "first MARK-K1"})
	must(t, err)
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	r.node.Kill()
	r.startNodeEnv("CAST_FAILPOINTS=node.after-credential")

	r.fake.RejectCredential(fleetTokA, 429)
	seq := r.send(sess.Id, "second MARK-K2")
	if code, ok := r.node.Wait(2 * time.Minute); !ok || code == 0 {
		t.Fatalf("the node did not die at the failpoint (exit %d, exited %v)", code, ok)
	}
	if out := r.node.Output(); !strings.Contains(out, "failpoint reached") || !strings.Contains(out, "node.after-credential") {
		t.Fatalf("the node died elsewhere:\n%s", out)
	}
	r.startNode()
	waitAnswered(r, sess.Id, "MARK-K2", seq)
	if tok := bearerOf(r, "MARK-K2"); tok != fleetTokB {
		t.Fatalf("after the crash the turn ran with %q, want account B", tok)
	}
}

// Codex with a fleet account: codex reads the node's shared auth.json (its
// provider set to OpenAI auth), records the provider's x-codex-* usage
// headers in its rollout, and the node reports them: `cast account ls`
// shows the window. On a limit the session parks until that window's
// reset, which the provider named (the cooldown is an hour here), and the
// turn runs at the reset on the same account, answered once.
func TestFleetCodexResumesAtProviderReset(t *testing.T) {
	t.Parallel()
	r, c, _ := newCodexFleetRig(t, func(c *controlplane.Config) { c.Fleet.Policy = fleet.PolicyResume })
	const tok = "sk-cx-FLEET-secret"
	addCodexAccount(t, r, c, "cx", tok, true)

	// The reset must still be ahead when the second turn is refused: the
	// first real Codex turn took 42s beside other real-CLI tests on two
	// cores, past the 15s this was. The test waits for it, idle.
	reset := time.Now().Add(75 * time.Second).Truncate(time.Second)
	r.fake.SetHeader("x-codex-primary-used-percent", "99")
	r.fake.SetHeader("x-codex-primary-window-minutes", "300")
	r.fake.SetHeader("x-codex-primary-reset-at", fmt.Sprint(reset.Unix()))
	ctx := context.Background()
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "codex", Cwd: t.TempDir(), Text: "first MARK-C1"})
	must(t, err)
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	if got := bearerOf(r, "MARK-C1"); got != tok {
		t.Fatalf("codex sent %q, not the fleet account's key", got)
	}
	var v struct {
		Accounts []struct {
			Usage []struct {
				Name        string  `json:"name"`
				UsedPercent float64 `json:"used_percent"`
				ResetsAt    string  `json:"resets_at"`
			} `json:"usage"`
			LimitedUntil string `json:"limited_until"`
		}
	}
	// The fleet records the turn's usage just after the session's idle
	// state (both in the node's one ReportTurn call): wait for it.
	reported := func() bool {
		must(t, json.Unmarshal([]byte(c.must("account", "ls", "--json")), &v))
		return len(v.Accounts) == 1 && len(v.Accounts[0].Usage) == 1 && v.Accounts[0].Usage[0].UsedPercent == 99 && v.Accounts[0].Usage[0].ResetsAt != ""
	}
	testharness.WaitFor(t, 30*time.Second, "the turn's usage windows recorded", reported)

	r.fake.RejectCredential(tok, 429)
	seq := r.send(sess.Id, "second MARK-C2")
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_PARKED, seq-1)
	// The session's state is stored before the fleet records the limit
	// (both in the node's one ReportTurn call): wait for the record.
	testharness.WaitFor(t, 30*time.Second, "the account's limit recorded", func() bool {
		return listAccounts(t, c)["cx"].LimitedUntil != ""
	})
	must(t, json.Unmarshal([]byte(c.must("account", "ls", "--json")), &v))
	until, err := time.Parse(time.RFC3339, v.Accounts[0].LimitedUntil)
	if err != nil || !until.Equal(reset) {
		t.Fatalf("limited until %q (%v), want the provider's reset %v", v.Accounts[0].LimitedUntil, err, reset)
	}
	r.fake.RejectCredential(tok, 0)
	waitAnswered(r, sess.Id, "MARK-C2", seq)
	if now := time.Now(); now.Before(reset) {
		t.Fatalf("the parked turn ran at %v, before the window's reset %v", now, reset)
	}
}

// newCodexFleetRig is a codex node whose provider takes OpenAI auth, so
// codex reads the node's shared auth.json (no API key in its env); the
// fleet sweeps every 200ms and a limit lasts an hour unless the provider
// names its reset. cb changes the control plane's config further.
func newCodexFleetRig(t *testing.T, cb func(*controlplane.Config)) (*turnRig, cli, string) {
	r := newTurnRigWith(t, func(c *controlplane.Config, _ string) {
		c.Fleet.Cooldown, c.Fleet.Sweep = time.Hour, 200*time.Millisecond
		cb(c)
	}, "codex")
	markCustodian(t, r, "worker")
	codexHome := filepath.Join(r.homes["codex"], ".codex")
	cfg, err := os.ReadFile(filepath.Join(codexHome, "config.toml"))
	must(t, err)
	if !strings.Contains(string(cfg), `env_key = "FAKE_API_KEY"`) {
		t.Fatalf("unexpected codex config:\n%s", cfg)
	}
	cfg = []byte(strings.Replace(string(cfg), `env_key = "FAKE_API_KEY"`, `requires_openai_auth = true`, 1))
	must(t, os.WriteFile(filepath.Join(codexHome, "config.toml"), cfg, 0o600))
	return r, castCLI(t, r), codexHome
}

// addCodexAccount adds an API-key Codex account; for the first one added
// (active), it waits until the node wrote it into auth.json.
func addCodexAccount(t *testing.T, r *turnRig, c cli, name, tok string, active bool) {
	addAccount(c, "codex", name, `{"auth_mode":"apikey","OPENAI_API_KEY":"`+tok+`"}`)
	if active {
		waitStore(t, r, "codex", tok)
	}
}

// Codex switches accounts too, by itself (auto) or once a person approves
// (ask). The fake provider seals each answer's reasoning to the account
// that asked (as OpenAI's encrypted_content is) and refuses reasoning
// sealed to another account. Account A answers two
// turns (the second carries the first's sealed reasoning back: codex does
// send it), then hits its usage limit: the fleet switches to B, the node
// rebuilds the session's rollout for B without A's encrypted reasoning
// (summaries kept as text codex shows), and the parked turn is answered
// once on B, its request carrying the earlier turns' text and nothing
// sealed to A.
func TestFleetCodexSwitchesAccount(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{fleet.PolicyAuto, fleet.PolicyAsk} {
		t.Run(policy, func(t *testing.T) { codexSwitch(t, policy) })
	}
}

func codexSwitch(t *testing.T, policy string) {
	r, c, codexHome := newCodexFleetRig(t, func(c *controlplane.Config) { c.Fleet.Policy = policy })
	const tokA, tokB = "sk-cx-FLEET-A-secret", "sk-cx-FLEET-B-secret"
	addCodexAccount(t, r, c, "cx-a", tokA, true)
	addCodexAccount(t, r, c, "cx-b", tokB, false)
	r.fake.SetEncryptedReasoning(true)

	ctx := context.Background()
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "codex", Cwd: t.TempDir(), Text: "first MARK-S1"})
	must(t, err)
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	// An idle session, not parked when the fleet switches.
	idle, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "codex", Cwd: t.TempDir(), Text: "first MARK-I1"})
	must(t, err)
	r.waitState(idle.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	seq := r.send(sess.Id, "second MARK-S2")
	waitAnswered(r, sess.Id, "MARK-S2", seq)
	if got := bearerOf(r, "MARK-S2"); got != tokA {
		t.Fatalf("second turn sent with %q, want account A", got)
	}
	if body := lastBody(r.fake, "MARK-S2"); !strings.Contains(body, fakemodel.SealOf(tokA)) {
		t.Fatalf("codex did not send A's sealed reasoning back on A (the test would prove nothing):\n%s", body)
	}

	r.fake.RejectCredential(tokA, 429)
	seq = r.send(sess.Id, "third MARK-S3")
	if policy == fleet.PolicyAsk {
		waitChoice(r, "codex", sess.Id, seq, "cx-a")
		if out := c.must("account", "approve", "--agent", "codex"); !strings.Contains(out, "now on account cx-b") {
			t.Fatalf("approve said %q", out)
		}
	}
	waitAnswered(r, sess.Id, "MARK-S3", seq)
	if got := bearerOf(r, "MARK-S3"); got != tokB {
		t.Fatalf("the parked turn ran again with %q, want account B", got)
	}
	waitSwitchNotice(t, r, sess.Id, "Now using account cx-b (was cx-a")
	var onB []string
	for _, req := range r.fake.Turns() {
		if strings.Contains(string(req.Body), "MARK-S3") && strings.Contains(req.Header.Get("Authorization"), tokB) {
			onB = append(onB, string(req.Body))
			if req.Status != 200 {
				t.Fatalf("B refused the turn (%d): %s", req.Status, req.Body)
			}
		}
	}
	if len(onB) != 1 {
		t.Fatalf("%d requests for the parked turn on B, want 1", len(onB))
	}
	for _, want := range []string{"MARK-S1", "MARK-S2"} {
		if !strings.Contains(onB[0], want) {
			t.Fatalf("B's request lacks the earlier turn %s:\n%s", want, onB[0])
		}
	}
	if strings.Contains(onB[0], fakemodel.SealOf(tokA)) || strings.Contains(onB[0], "encrypted_content\":\"fakeenc") {
		t.Fatalf("B's request carries encrypted reasoning from A:\n%s", onB[0])
	}
	// The session that sat idle through the switch resumes on B too, its
	// rollout (written on A) rebuilt first.
	seq = r.send(idle.Id, "second MARK-I2")
	waitAnswered(r, idle.Id, "MARK-I2", seq)
	if got := bearerOf(r, "MARK-I2"); got != tokB {
		t.Fatalf("the idle session's turn ran with %q, want account B", got)
	}
	if body := lastBody(r.fake, "MARK-I2"); !strings.Contains(body, "MARK-I1") || strings.Contains(body, fakemodel.SealOf(tokA)) {
		t.Fatalf("the idle session's request on B: earlier turn kept %v, A's sealed reasoning sent %v",
			strings.Contains(body, "MARK-I1"), strings.Contains(body, fakemodel.SealOf(tokA)))
	}
	// The rollout B resumed keeps A's reasoning summaries as text, and none
	// of A's sealed content.
	rollout := rolloutWith(t, codexHome, "MARK-S3")
	if !strings.Contains(rollout, fakemodel.ThoughtSummary(1)) || strings.Contains(rollout, fakemodel.SealOf(tokA)) {
		t.Fatalf("rebuilt rollout: summary kept %v, A's sealed content present %v",
			strings.Contains(rollout, fakemodel.ThoughtSummary(1)), strings.Contains(rollout, fakemodel.SealOf(tokA)))
	}
}

// rolloutWith is the text of the codex rollout under home holding marker.
func rolloutWith(t *testing.T, home, marker string) string {
	t.Helper()
	var found string
	_ = filepath.WalkDir(filepath.Join(home, "sessions"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".jsonl") {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), marker) {
			found = string(b)
		}
		return nil
	})
	if found == "" {
		t.Fatalf("no rollout under %s holds %s", home, marker)
	}
	return found
}

// Claude on a fleet account reports its usage windows (stream-json
// rate_limit_event): at 96% of the 5-hour window the fleet switches ahead,
// so the next turn runs on the other account without ever being refused.
func TestFleetClaudeSwitchesAhead(t *testing.T) {
	t.Parallel()
	r, c, _ := newFleetRig(t, time.Hour)
	reset := time.Now().Add(2 * time.Hour).Truncate(time.Second)
	claudeWindow(r, "0.96", "0.9", reset)
	ctx := context.Background()
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Text: "first MARK-S1"})
	must(t, err)
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	if tok := bearerOf(r, "MARK-S1"); tok != fleetTokA {
		t.Fatalf("first turn on %q", tok)
	}
	testharness.WaitFor(t, 30*time.Second, "the switch ahead", func() bool { return listAccounts(t, c)["work-b"].Active })
	seq := r.send(sess.Id, "second MARK-S2")
	waitAnswered(r, sess.Id, "MARK-S2", seq)
	if tok := bearerOf(r, "MARK-S2"); tok != fleetTokB {
		t.Fatalf("second turn on %q, want account B", tok)
	}
	for _, req := range r.fake.Turns() {
		if req.Status != 200 {
			t.Fatalf("a request was refused (%d): the switch was not ahead of the limit", req.Status)
		}
	}
	waitSwitchNotice(t, r, sess.Id, "at 96% of its 5-hour window")
	checkFreshUsage(t, c, reset)
}

// checkFreshUsage: `cast usage` shows the figure the real claude just
// reported for work-a (96% of its 5-hour window, resetting at reset) as
// fresh, and says what a limit does now.
func checkFreshUsage(t *testing.T, c cli, reset time.Time) {
	t.Helper()
	var v struct {
		Fleets []struct {
			Agent      string
			PolicyLine string `json:"policy_line"`
			Accounts   []struct {
				Name       string
				Stale      bool
				AgeSeconds *int64 `json:"age_seconds"`
				Windows    []struct {
					Name, Kind      string
					UsedPercent     float64   `json:"used_percent"`
					ResetsAt        time.Time `json:"resets_at"`
					ResetsInSeconds int64     `json:"resets_in_seconds"`
				}
			}
		}
	}
	must(t, json.Unmarshal([]byte(c.must("usage", "--json")), &v))
	if len(v.Fleets) != 1 || v.Fleets[0].Agent != "claude" || len(v.Fleets[0].Accounts) != 2 {
		t.Fatalf("cast usage --json: %+v", v)
	}
	a := v.Fleets[0].Accounts[0]
	if a.Name != "work-a" || a.Stale || a.AgeSeconds == nil || *a.AgeSeconds > 120 || len(a.Windows) != 1 {
		t.Fatalf("work-a's figure is not fresh: %+v", a)
	}
	w := a.Windows[0]
	if w.Name != "five_hour" || w.Kind != "session" || w.UsedPercent != 96 || !w.ResetsAt.Equal(reset) || w.ResetsInSeconds < 3600 || w.ResetsInSeconds > 7200 {
		t.Fatalf("work-a's 5-hour window: %+v", w)
	}
	text := c.must("usage")
	for _, want := range []string{"work-a", "5-hour session", "96%", "resets in 1h ", " ago", v.Fleets[0].PolicyLine, "On a limit: auto-switch"} {
		if !strings.Contains(text, want) {
			t.Fatalf("cast usage lacks %q:\n%s", want, text)
		}
	}
}

// The ask policy with the real claude, set per account: work-a asks (the
// fleet stays auto). At A's limit the session parks with a notice and a
// pending choice (no switch, nothing runs on B); `cast account approve`
// switches to B and the parked turn is answered once there. Then B asks
// too: at B's limit `cast account use work-a` resolves the choice and the
// turn is answered on A. An answer with nothing pending is refused.
func TestFleetClaudeAskPolicy(t *testing.T) {
	t.Parallel()
	r, c, _ := newFleetRig(t, time.Hour)
	c.must("account", "policy", "work-a", "ask", "--agent", "claude")
	ctx := context.Background()
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Text: "first MARK-Q1"})
	must(t, err)
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	if _, errOut, code := c.run("account", "approve", "--agent", "claude"); code == 0 || !strings.Contains(errOut, "NO_ACCOUNT_CHOICE") && !strings.Contains(errOut, "waiting for an account choice") {
		t.Fatalf("approve with nothing pending: exit %d %q", code, errOut)
	}

	r.fake.RejectCredential(fleetTokA, 429)
	seq := r.send(sess.Id, "second MARK-Q2")
	waitChoice(r, "claude", sess.Id, seq, "work-a")
	if accounts := listAccounts(t, c); !accounts["work-a"].Active {
		t.Fatalf("ask switched by itself: %+v", accounts)
	}
	if tok := bearerOf(r, "MARK-Q2"); tok != "" {
		t.Fatalf("MARK-Q2 ran on %q before anyone answered", tok)
	}
	pending := usagePending(t, c)
	if pending == nil || pending.From != "work-a" || !slices.Contains(pending.Sessions, sess.Id) {
		t.Fatalf("cast usage --json pending = %+v", pending)
	}
	if out := c.must("usage"); !strings.Contains(out, "Waiting for a choice: work-a is at its limit") {
		t.Fatalf("cast usage does not show the choice:\n%s", out)
	}
	// No --agent: claude's is the one choice waiting.
	if out := c.must("account", "approve"); !strings.Contains(out, "claude: now on account work-b") || !strings.Contains(out, sess.Id) {
		t.Fatalf("approve said %q", out)
	}
	waitAnswered(r, sess.Id, "MARK-Q2", seq)
	if tok := bearerOf(r, "MARK-Q2"); tok != fleetTokB {
		t.Fatalf("the approved turn ran on %q, want account B", tok)
	}
	waitSwitchNotice(t, r, sess.Id, "Now using account work-b (was work-a, at its usage limit; switch approved")

	c.must("account", "policy", "work-b", "ask", "--agent", "claude")
	r.fake.RejectCredential(fleetTokB, 429)
	r.fake.RejectCredential(fleetTokA, 0)
	seq = r.send(sess.Id, "third MARK-Q3")
	waitChoice(r, "claude", sess.Id, seq, "work-b")
	c.must("account", "use", "work-a", "--agent", "claude")
	waitAnswered(r, sess.Id, "MARK-Q3", seq)
	if tok := bearerOf(r, "MARK-Q3"); tok != fleetTokA {
		t.Fatalf("the turn after `account use` ran on %q, want account A", tok)
	}
	if p := usagePending(t, c); p != nil {
		t.Fatalf("a choice still pending after `account use`: %+v", p)
	}
}

// waitChoice waits until the session is parked after seq with an
// account_choice notice naming the limited account of agent's fleet.
func waitChoice(r *turnRig, agent, id string, seq int64, from string) {
	r.t.Helper()
	testharness.WaitFor(r.t, 3*time.Minute, "the account choice in "+id, func() bool {
		sess, err := r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{Id: id})
		if err != nil || sess.State != castv1.SessionState_SESSION_STATE_PARKED {
			return false
		}
		return slices.ContainsFunc(r.messages(id), func(m *castv1.Message) bool {
			return m.Seq > seq && m.NoticeType == "account_choice" && strings.Contains(m.Text, "Account "+from+" is at its usage limit") &&
				strings.Contains(m.Text, "cast account approve --agent "+agent)
		})
	})
}

type pendingJSON struct {
	From     string
	Sessions []string
}

// usagePending is the claude fleet's pending choice in `cast usage --json`.
func usagePending(t *testing.T, c cli) *pendingJSON {
	t.Helper()
	var v struct {
		Fleets []struct{ Pending *pendingJSON }
	}
	must(t, json.Unmarshal([]byte(c.must("usage", "--json", "--agent", "claude")), &v))
	if len(v.Fleets) != 1 {
		t.Fatalf("cast usage --json: %+v", v)
	}
	return v.Fleets[0].Pending
}

// The reservation ledger with the real claude: account A reports 90% of
// its 5-hour window (below the 95% switch-ahead), and each running fleet
// turn reserves 3%. Parallel turns started together crowd A past 95%, so
// the fleet moves to B before they run A into its limit, and a later turn
// runs on B. Without the ledger A would stay active at 90%.
func TestFleetClaudeParallelTurnsSpread(t *testing.T) {
	t.Parallel()
	r, c, _ := newFleetRigWith(t, func(cfg *controlplane.Config) { cfg.Fleet.Cooldown, cfg.Fleet.TurnReserve = time.Hour, 3 })
	reset := time.Now().Add(2 * time.Hour).Truncate(time.Second)
	claudeWindow(r, "0.90", "0.75", reset)
	ctx := context.Background()
	first, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Text: "warm MARK-P0"})
	must(t, err)
	r.waitState(first.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	if listAccounts(t, c)["work-b"].Active {
		t.Fatal("switched at 90% with one turn")
	}
	var ids []string
	for i := range 3 {
		s, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Text: fmt.Sprintf("parallel MARK-P%d", i+1)})
		must(t, err)
		ids = append(ids, s.Id)
	}
	testharness.WaitFor(t, time.Minute, "the fleet moves to B", func() bool { return listAccounts(t, c)["work-b"].Active })
	for _, id := range ids {
		r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	}
	seq := r.send(first.Id, "later MARK-P9")
	waitAnswered(r, first.Id, "MARK-P9", seq)
	if tok := bearerOf(r, "MARK-P9"); tok != fleetTokB {
		t.Fatalf("the later turn ran on %q, want account B", tok)
	}
	notices := 0
	for _, id := range ids {
		if strings.Contains(lastSwitchNotice(r, id), "turns running") {
			notices++
		}
	}
	if notices != 1 {
		t.Fatalf("%d sessions got the crowded-switch notice, want 1", notices)
	}
	for _, req := range r.fake.Turns() {
		if req.Status != 200 {
			t.Fatalf("a request was refused (%d)", req.Status)
		}
	}
}

// `cast usage` with a fresh and a stale figure, both reported by the real
// claude: the control plane's fleet clock runs two hours behind while a
// turn on work-a reports its windows (so that figure is two hours old by
// the time anyone looks), then on time for a turn on work-b.
func TestFleetUsageFreshAndStale(t *testing.T) {
	t.Parallel()
	var lag atomic.Int64
	lag.Store(int64(2 * time.Hour))
	r, c, _ := newFleetRigWith(t, func(cfg *controlplane.Config) {
		cfg.Fleet.Cooldown = time.Hour
		cfg.Fleet.Now = func() time.Time { return time.Now().Add(-time.Duration(lag.Load())) }
	})
	reset := time.Now().Add(3 * time.Hour).Truncate(time.Second)
	claudeWindow(r, "0.40", "0.3", reset)
	ctx := context.Background()
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Text: "on a MARK-U1"})
	must(t, err)
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
	var v struct {
		Fleets []struct {
			Accounts []struct {
				Name       string
				Stale      bool
				AgeSeconds *int64 `json:"age_seconds"`
				Windows    []struct {
					UsedPercent float64 `json:"used_percent"`
				}
			}
		}
	}
	// The turn's usage report may land after the session went idle: the
	// clock moves on only once work-a's figure is recorded (else it could
	// be recorded fresh).
	testharness.WaitFor(t, 30*time.Second, "work-a's figure recorded", func() bool {
		must(t, json.Unmarshal([]byte(c.must("usage", "--json")), &v))
		return len(v.Fleets) == 1 && len(v.Fleets[0].Accounts) > 0 && v.Fleets[0].Accounts[0].AgeSeconds != nil
	})
	lag.Store(0)
	c.must("account", "use", "work-b", "--agent", "claude")
	seq := r.send(sess.Id, "on b MARK-U2")
	waitAnswered(r, sess.Id, "MARK-U2", seq)
	if tok := bearerOf(r, "MARK-U2"); tok != fleetTokB {
		t.Fatalf("MARK-U2 ran on %q", tok)
	}
	testharness.WaitFor(t, 30*time.Second, "both figures recorded", func() bool {
		must(t, json.Unmarshal([]byte(c.must("usage", "--json")), &v))
		return len(v.Fleets) == 1 && len(v.Fleets[0].Accounts) == 2 && v.Fleets[0].Accounts[1].AgeSeconds != nil
	})
	a, b := v.Fleets[0].Accounts[0], v.Fleets[0].Accounts[1]
	if a.Name != "work-a" || !a.Stale || a.AgeSeconds == nil || *a.AgeSeconds < 7000 || len(a.Windows) != 1 || a.Windows[0].UsedPercent != 40 {
		t.Fatalf("work-a's figure should be two hours old and stale: %+v", a)
	}
	if b.Name != "work-b" || b.Stale || *b.AgeSeconds > 120 || len(b.Windows) != 1 || b.Windows[0].UsedPercent != 40 {
		t.Fatalf("work-b's figure should be fresh: %+v", b)
	}
	text := c.must("usage")
	if strings.Count(text, "(stale)") != 1 || !strings.Contains(text, "2h 0m ago (stale)") && !strings.Contains(text, "2h 1m ago (stale)") {
		t.Fatalf("cast usage:\n%s", text)
	}
}
