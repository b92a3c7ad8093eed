package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/testharness"
)

// userHome is a scratch HOME whose agents are already logged in the way a
// person's are, with no agents config anywhere: Claude has an OAuth
// credentials file and its own settings.json pointing it at the fake
// model; Codex has auth.json and a config.toml provider on the fake. It
// returns the home and the files a person owns there (credentials and
// settings), which cast must leave byte-identical.
func userHome(t *testing.T, fakeURL string) (string, map[string][]byte) {
	home := t.TempDir()
	files := map[string]string{
		".claude/.credentials.json": fmt.Sprintf(`{"claudeAiOauth":{"accessToken":"sk-ant-oat01-USER-OWN","refreshToken":"r","expiresAt":%d,"scopes":["user:inference"],"subscriptionType":"max"}}`,
			time.Now().Add(24*time.Hour).UnixMilli()),
		".claude/settings.json": `{"env":{"ANTHROPIC_BASE_URL":"` + fakeURL + `","CLAUDE_CODE_MAX_RETRIES":"0"}}` + "\n",
		".codex/auth.json":      `{"auth_mode":"apikey","OPENAI_API_KEY":"sk-user-own-codex"}`,
		".codex/config.toml": `model = "` + agenttest.FakeModel + `"
model_provider = "fake"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.fake]
name = "Fake loopback"
base_url = "` + fakeURL + `/v1"
wire_api = "responses"
requires_openai_auth = true
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false
`,
	}
	owned := map[string][]byte{}
	for rel, content := range files {
		p := filepath.Join(home, rel)
		must(t, os.MkdirAll(filepath.Dir(p), 0o700))
		must(t, os.WriteFile(p, []byte(content), 0o600))
		owned[p] = []byte(content)
	}
	return home, owned
}

// userEnv is the environment of a person with that home: the agents' CLIs
// on PATH (as `npm i -g` would put them), nothing of cast's configured.
func userEnv(t *testing.T, home, addr string) []string {
	var env []string
	for _, kv := range testharness.ScratchEnv(t) {
		if !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "CAST_") {
			env = append(env, kv)
		}
	}
	agentsBin := filepath.Dir(agenttest.Bin(t, "claude"))
	// A person has no CAST_INSECURE (their --dev serves TLS) and finds the
	// context --dev writes in ~/.config/cast.
	return append(env, "HOME="+home, "PATH="+agentsBin+":"+os.Getenv("PATH"), "CAST_ADDR="+addr, "CAST_INSECURE=", "XDG_CONFIG_HOME=")
}

// startUserDev starts `controlplane --dev` the README's way, as the user
// of env: only the ports differ (tests run side by side), and extra flags.
func startUserDev(t *testing.T, env []string, addr string, extra ...string) *testharness.Proc {
	args := append([]string{"--dev", "--listen", addr, "--metrics-listen", "127.0.0.1:0", "--node-name", "devnode", "--log-format", "json"}, extra...)
	return testharness.StartProcEnv(t, env, filepath.Join(testharness.Binaries(t), "controlplane"), args...)
}

// shell runs one README line's command (no shell: split on spaces, double
// quotes kept together) in dir with env, $id substituted.
type shell struct {
	t    *testing.T
	dir  string
	env  []string
	vars map[string]string
}

var wordRe = regexp.MustCompile(`"[^"]*"|\S+`)

func (s *shell) argv(line string) []string {
	var out []string
	for _, w := range wordRe.FindAllString(line, -1) {
		w = strings.Trim(w, `"`)
		for k, v := range s.vars {
			w = strings.ReplaceAll(w, "$"+k, v)
		}
		out = append(out, w)
	}
	return out
}

func (s *shell) command(ctx context.Context, line string) *exec.Cmd {
	argv := s.argv(line)
	bin := filepath.Join(testharness.Binaries(s.t), strings.TrimPrefix(argv[0], "bin/"))
	cmd := exec.CommandContext(ctx, bin, argv[1:]...)
	cmd.Dir, cmd.Env = s.dir, s.env
	return cmd
}

// run runs a line to its end and returns its stdout; a failure fails the test.
func (s *shell) run(line string) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	cmd := s.command(ctx, line)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		s.t.Fatalf("%s: %v\n%s%s", line, err, out.String(), errb.String())
	}
	s.t.Logf("$ %s\n%s", line, out.String())
	return out.String()
}

// readmeUse is the README's "Use" block, one command a line, comments cut.
func readmeUse(t *testing.T) []string {
	b, err := os.ReadFile(filepath.Join(testharness.RepoRoot(t), "README.md"))
	must(t, err)
	s := string(b)
	i := strings.Index(s, "## Use")
	if i < 0 {
		t.Fatal("README has no ## Use section")
	}
	s = s[i:]
	start := strings.Index(s, "```sh\n")
	end := strings.Index(s[start+6:], "```")
	if start < 0 || end < 0 {
		t.Fatal("README's Use section has no sh block")
	}
	var lines []string
	for _, l := range strings.Split(s[start+6:start+6+end], "\n") {
		if j := strings.Index(l, " #"); j >= 0 {
			l = l[:j]
		}
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// The README's first two commands and its quick start, as written and in
// its order, on a machine whose agents are already logged in (scratch HOME,
// fake credentials, the agents' own settings pointing them at the fake
// model) and with no cast config file: `cast new --agent claude` is
// answered, the native session lands where Claude's own picker looks, the
// dev node gives Claude cast's MCP tools, `cast nodes` says claude is
// ready, and the user's credential and settings files are left
// byte-identical.
func TestReadmeQuickStartWithOwnAgents(t *testing.T) {
	t.Parallel()
	fake := fakemodel.Start(t)
	home, owned := userHome(t, fake.URL)
	addr := freeAddr(t)
	env := userEnv(t, home, addr)
	dev := startUserDev(t, env, addr)
	c := cli{t: t, bin: filepath.Join(testharness.Binaries(t), "cast"), env: env}
	c.waitNode("devnode", true)
	// TLS on loopback: the dev context trusts the dev CA, the dev node
	// holds a client certificate, and plaintext gets nowhere.
	ctxFile, _ := os.ReadFile(filepath.Join(home, ".config", "cast", "config.yaml"))
	if !strings.Contains(dev.Output(), "tls on") || !bytes.Contains(ctxFile, []byte("ca: ")) {
		t.Fatalf("--dev without TLS, or its context without the CA:\n%s", ctxFile)
	}
	if _, err := os.Stat(filepath.Join(home, ".local", "share", "cast", "controlplane", "node", "identity.pem")); err != nil {
		t.Errorf("the dev node has no client certificate: %v", err)
	}
	noContext := append(append([]string{}, env...), "HOME="+t.TempDir())
	if _, errOut, code := (cli{t: t, bin: c.bin, env: noContext}).run("nodes", "--timeout", "3s"); code == 0 || !strings.Contains(errOut, "speaks TLS, but no CA is trusted for it") {
		t.Errorf("a plaintext cast got past the --dev control plane's TLS: exit %d, %s", code, errOut)
	}

	sh := &shell{t: t, dir: t.TempDir(), env: env, vars: map[string]string{}}
	var watch *exec.Cmd
	var watchOut testharness.LockedBuffer
	// waitAnswered waits, as a person reading the answers would, until the
	// claude session answered both its messages and is idle. Both may go
	// in one turn (the second arrives before the first turn starts, and
	// the node sends what is pending together): the newest answer has
	// then seen the second message.
	waitAnswered := func() {
		t.Helper()
		id := sh.vars["id"]
		done := func() bool {
			out, _, _ := c.run("read", id)
			get, _, _ := c.run("get", id, "--json")
			last := strings.LastIndex(out, "FAKE-ANSWER")
			return last >= 0 && strings.Contains(out[last:], "also add tests") && strings.Contains(get, "SESSION_STATE_IDLE")
		}
		for end := time.Now().Add(3 * time.Minute); !done(); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(end) {
				read, _, _ := c.run("read", id)
				get, _, _ := c.run("get", id)
				t.Fatalf("claude did not answer both messages in 3m:\n%s\n%s", get, read)
			}
		}
	}
	for _, line := range readmeUse(t) {
		switch {
		case strings.HasPrefix(line, "bin/cast rm $id"):
			waitAnswered() // rm refuses a session that is running a turn
			sh.run(line)
		case strings.HasPrefix(line, "go build -o bin/ ./cmd/..."):
			continue // testharness.Binaries built them
		case strings.HasPrefix(line, "id=$("):
			sh.vars["id"] = strings.TrimSpace(sh.run(strings.TrimSuffix(strings.TrimPrefix(line, "id=$("), ")")))
		case strings.HasPrefix(line, "bin/cast watch"):
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			watch = sh.command(ctx, line)
			watch.Stdout, watch.Stderr = &watchOut, &watchOut
			must(t, watch.Start())
		case strings.HasPrefix(line, "bin/cast web"):
			openWebLink(t, strings.TrimSpace(sh.run(line)))
		case strings.HasPrefix(line, "bin/cast "):
			out := sh.run(line)
			if strings.Contains(line, "--json") {
				var v map[string]any
				if err := json.Unmarshal([]byte(out), &v); err != nil {
					t.Fatalf("%s: not JSON: %v\n%s", line, err, out)
				}
			}
		default:
			t.Fatalf("README line %q: the quick-start test does not know how to run it; teach it", line)
		}
	}
	id := sh.vars["id"]
	if id == "" || watch == nil {
		t.Fatalf("README quick start lost its `id=$(bin/cast new --agent claude ...)` or `cast watch` line")
	}

	// Both of the claude session's messages are answered, and watch shows it.
	waitAnswered()
	testharness.WaitFor(t, 30*time.Second, "cast watch shows the answer", func() bool {
		return strings.Contains(watchOut.String(), "FAKE-ANSWER")
	})
	if got := bearerOfAny(fake, "refactor the parser"); got != "sk-ant-oat01-USER-OWN" {
		t.Fatalf("claude sent %q, not the user's own login", got)
	}
	// cast's MCP server on the dev setup: the history tool is offered, and
	// a tool that needs approval waits for `cast approve`.
	if body := lastBody(fake, "refactor the parser"); !strings.Contains(body, "mcp__cast__history") {
		t.Error("claude was not given cast's history tool on the --dev setup")
	}
	// (A new session: the README's `cast rm` archived $id.)
	sh.vars["asker"] = strings.TrimSpace(sh.run(`bin/cast new --agent claude "TOOLCALL CMD[touch approved.txt]"`))
	testharness.WaitFor(t, 2*time.Minute, "the session waits for permission", func() bool {
		out, _, _ := c.run("get", sh.vars["asker"], "--json")
		return strings.Contains(out, "WAITING_PERMISSION")
	})
	sh.run("bin/cast approve -s $asker")
	testharness.WaitFor(t, 2*time.Minute, "the approved tool ran", func() bool {
		_, err := os.Stat(filepath.Join(sh.dir, "approved.txt"))
		return err == nil
	})
	// The native session is where `claude --resume` looks: ~/.claude/projects.
	if m, _ := filepath.Glob(filepath.Join(home, ".claude", "projects", "*", "*.jsonl")); len(m) == 0 {
		t.Error("no claude session under the user's ~/.claude/projects")
	}
	// Readiness as `cast nodes` prints it.
	if out := c.must("nodes"); !regexp.MustCompile(`devnode\s+claude\s+\S+\s+yes\s+logged in`).MatchString(out) {
		t.Errorf("cast nodes does not show claude ready:\n%s", out)
	}
	for p, want := range owned {
		if got, _ := os.ReadFile(p); !bytes.Equal(got, want) {
			t.Errorf("%s changed by cast:\n%s", p, got)
		}
	}
	// Nothing of cast's in the user's home beyond what the agents write.
	for _, f := range []string{"cast-history.ts", ".claude/cast-mcp.json"} {
		if _, err := os.Stat(filepath.Join(home, f)); err == nil {
			t.Errorf("cast wrote %s into the user's home", f)
		}
	}
	if !dev.Stop(30 * time.Second) {
		t.Fatal("dev process did not stop on SIGTERM")
	}
}

// bearerOfAny is the bearer token of the last answered turn whose request
// holds marker.
func bearerOfAny(fake *fakemodel.Server, marker string) string {
	tok := ""
	for _, req := range fake.Turns() {
		if req.Status == 200 && strings.Contains(string(req.Body), marker) {
			tok = strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ")
		}
	}
	return tok
}

func lastBody(fake *fakemodel.Server, marker string) string {
	body := ""
	for _, req := range fake.Turns() {
		if strings.Contains(string(req.Body), marker) {
			body = string(req.Body)
		}
	}
	return body
}

// Fleet accounts and the user's own login: a node that did not opt in
// refuses to rewrite it (the store stays byte-identical, the node says
// how to opt in); one started with --node-fleet-accounts rewrites it and
// first keeps the user's login, byte for byte, in its data dir.
func TestFleetAccountsOnOwnLogin(t *testing.T) {
	t.Parallel()
	fake := fakemodel.Start(t)
	for _, optIn := range []bool{false, true} {
		t.Run(fmt.Sprintf("opted_in=%v", optIn), func(t *testing.T) {
			home, owned := userHome(t, fake.URL)
			store := filepath.Join(home, ".claude", ".credentials.json")
			addr := freeAddr(t)
			env := userEnv(t, home, addr)
			var extra []string
			if optIn {
				extra = append(extra, "--node-fleet-accounts")
			}
			dev := startUserDev(t, env, addr, extra...)
			c := cli{t: t, bin: filepath.Join(testharness.Binaries(t), "cast"), env: env}
			c.waitNode("devnode", true)
			c.must("account", "add", "work-a", "--agent", "claude", "--credentials", credFile(t, "sk-ant-oat01-FLEET-A"))
			if !optIn {
				testharness.WaitFor(t, 30*time.Second, "the node refuses the rewrite", func() bool {
					return strings.Contains(dev.Output(), "will not rewrite "+store)
				})
				if !strings.Contains(dev.Output(), "--node-fleet-accounts") {
					t.Errorf("the refusal does not say how to opt in:\n%s", dev.Output())
				}
				if got, _ := os.ReadFile(store); !bytes.Equal(got, owned[store]) {
					t.Fatalf("the user's store changed without opt-in:\n%s", got)
				}
				return
			}
			testharness.WaitFor(t, 30*time.Second, "the node writes the fleet account", func() bool {
				b, _ := os.ReadFile(store)
				return strings.Contains(string(b), "FLEET-A")
			})
			backups, _ := filepath.Glob(filepath.Join(home, ".local", "share", "cast", "controlplane", "node", "credential-backups", "claude", ".credentials.json.*"))
			if len(backups) != 1 {
				t.Fatalf("backups %v, want one", backups)
			}
			if got, _ := os.ReadFile(backups[0]); !bytes.Equal(got, owned[store]) {
				t.Fatalf("backup is not the user's login:\n%s", got)
			}
			if fi, err := os.Stat(backups[0]); err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("backup mode: %v %v", fi, err)
			}
			if !strings.Contains(dev.Output(), "the previous one is backed up") {
				t.Error("the node did not say it replaced the store and where the backup is")
			}
		})
	}
}

// In the user's own home a rebuilt transcript is a new session file: after
// a failed turn (the native session is stale), the next turn rebuilds the
// history from the neutral copy into a new file and never rewrites the one
// the user may have resumed in Claude meanwhile.
func TestOwnHomeRebuildWritesNewFile(t *testing.T) {
	t.Parallel()
	fake := fakemodel.Start(t)
	home, _ := userHome(t, fake.URL)
	addr := freeAddr(t)
	env := userEnv(t, home, addr)
	startUserDev(t, env, addr)
	c := cli{t: t, bin: filepath.Join(testharness.Binaries(t), "cast"), env: env}
	c.waitNode("devnode", true)
	sh := &shell{t: t, dir: t.TempDir(), env: env, vars: map[string]string{}}
	state := func(want string) func() bool {
		return func() bool {
			out, _, _ := c.run("get", sh.vars["id"], "--json")
			return strings.Contains(out, want)
		}
	}
	answers := func(n int) func() bool {
		return func() bool {
			out, _, _ := c.run("read", sh.vars["id"])
			return strings.Count(out, "FAKE-ANSWER") >= n && state("SESSION_STATE_IDLE")()
		}
	}
	sh.vars["id"] = strings.TrimSpace(sh.run(`bin/cast new --agent claude "first MARK-R1"`))
	testharness.WaitFor(t, 2*time.Minute, "the first answer", answers(1))
	files, _ := filepath.Glob(filepath.Join(home, ".claude", "projects", "*", "*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("claude sessions %v, want one", files)
	}
	fake.FailNext(1, 401)
	sh.run(`bin/cast send -s $id "second MARK-R2"`)
	testharness.WaitFor(t, 2*time.Minute, "the failed turn", state("SESSION_STATE_FAILED"))
	before, err := os.ReadFile(files[0])
	must(t, err)
	sh.run(`bin/cast send -s $id "third MARK-R3"`)
	testharness.WaitFor(t, 2*time.Minute, "the answer after the rebuild", answers(2))
	if after, _ := os.ReadFile(files[0]); !bytes.Equal(after, before) {
		t.Fatalf("the rebuild rewrote the existing session file %s", files[0])
	}
	now, _ := filepath.Glob(filepath.Join(home, ".claude", "projects", "*", "*.jsonl"))
	var rebuilt []byte
	for _, f := range now {
		if f != files[0] {
			rebuilt, _ = os.ReadFile(f)
		}
	}
	if !bytes.Contains(rebuilt, []byte("MARK-R1")) || !bytes.Contains(rebuilt, []byte("MARK-R3")) {
		t.Fatalf("no new session file with the rebuilt history and the new turn (files %v)", now)
	}
}

// openWebLink opens `cast web`'s one-time link as a browser would (no
// desktop here, so cast printed it): it asks, and its sign-in lands on
// the app, once.
func openWebLink(t *testing.T, link string) {
	t.Helper()
	if !strings.Contains(link, "/auth/login?code=") {
		t.Fatalf("cast web printed %q, not a login link", link)
	}
	jar, _ := cookiejar.New(nil)
	resp := testharness.OpenLoginLink(t, &http.Client{Jar: jar}, link)
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != "/" || len(jar.Cookies(resp.Request.URL)) != 1 {
		t.Fatalf("the web link landed on %s with %d", resp.Request.URL, resp.StatusCode)
	}
	again, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	again.Body.Close()
	if again.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the web link worked twice: %d", again.StatusCode)
	}
}
