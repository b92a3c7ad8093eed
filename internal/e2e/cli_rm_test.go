package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/claude"
	"github.com/cast-dev/cast/internal/agents/codex"
	"github.com/cast-dev/cast/internal/agents/gemini"
	"github.com/cast-dev/cast/internal/agents/pi"
	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/testharness"
	"github.com/cast-dev/cast/internal/transcript"
)

// `cast import` starts the session in the folder the native transcript
// records (not the shell's), and --cwd overrides it.
func TestCLIImportUsesTranscriptCwd(t *testing.T) {
	t.Parallel()
	r := newCLIRig(t, "n1")
	r.startNode("n2", func(c *node.Config) { c.Agents = testharness.MissingAgents(t.TempDir()) })
	msgs := []transcript.Message{{Kind: transcript.KindUser, Text: "fix the parser"}, {Kind: transcript.KindAssistant, Text: "done"}}
	for _, tc := range []struct {
		agent string
		w     agents.Writer
	}{{"claude", claude.Writer{}}, {"codex", codex.Writer{}}, {"pi", pi.Writer{}}, {"gemini", gemini.Writer{}}} {
		recorded := t.TempDir()
		out, err := tc.w.Write(agents.Target{Home: t.TempDir(), Cwd: recorded, SessionID: "origin" + tc.agent}, msgs)
		if err != nil {
			t.Fatal(err)
		}
		id := strings.TrimSpace(r.cli.must("import", "--agent", tc.agent, "--node", "n2", out.Path))
		if got := r.sessionCwd(id); got != recorded {
			t.Errorf("%s import: cwd %q, want the transcript's %q", tc.agent, got, recorded)
		}
		other := t.TempDir()
		id = strings.TrimSpace(r.cli.must("import", "--agent", tc.agent, "--node", "n2", "--cwd", other, out.Path))
		if got := r.sessionCwd(id); got != other {
			t.Errorf("%s import --cwd: cwd %q, want %q", tc.agent, got, other)
		}
	}
}

func (r *cliRig) sessionCwd(id string) string {
	r.t.Helper()
	var s struct{ Cwd string }
	if err := json.Unmarshal([]byte(r.cli.must("get", id, "--json")), &s); err != nil {
		r.t.Fatal(err)
	}
	return s.Cwd
}

// `cast rm` archives (hidden from ls, closed to sends, still readable);
// --purge deletes every key of the session, chunks of a large message
// included; a running session is refused until it is interrupted.
func TestCLIRemoveArchivesAndPurges(t *testing.T) {
	t.Parallel()
	ep := testharness.StartEtcd(t, nil)
	r := newCLIRigWith(t, func(c *controlplane.Config) { c.EtcdEndpoints, c.DataDir = []string{ep}, "" })
	hang := filepath.Join(t.TempDir(), "hanging-agent")
	if err := os.WriteFile(hang, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.startNode("n1", func(c *node.Config) { c.Agents["codex"] = node.AgentSetup{Bin: hang} })
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	keysOf := func(id string) []string {
		resp, err := etcd.Get(context.Background(), "/cast/v1/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, kv := range resp.Kvs {
			if strings.Contains(string(kv.Key), "/"+id) {
				out = append(out, string(kv.Key))
			}
		}
		return out
	}

	kept := r.history("claude", "n1", "keep me").Id
	id := r.history("claude", "n1", "old work", strings.Repeat("big tool output ", 40<<10)).Id
	if keys := keysOf(id); !slices.ContainsFunc(keys, func(k string) bool { return strings.Contains(k, "/chunks/") || strings.Contains(k, "/blobs/") }) {
		t.Fatalf("a 640 KB message left no chunk keys to purge: %v", keys)
	}
	if out := r.cli.must("rm", id); !strings.Contains(out, "archived "+id) {
		t.Fatalf("cast rm: %q", out)
	}
	if out := r.cli.must("ls"); strings.Contains(out, id) || !strings.Contains(out, kept) {
		t.Fatalf("cast ls after rm:\n%s", out)
	}
	if out := r.cli.must("ls", "--all"); !strings.Contains(out, id) || !strings.Contains(out, "archived") {
		t.Fatalf("cast ls --all after rm:\n%s", out)
	}
	if _, errOut, code := r.cli.run("send", "-s", id, "more"); code != 1 || !strings.Contains(errOut, "archived") || !strings.Contains(errOut, "cast fork "+id) {
		t.Fatalf("send to an archived session: exit %d %q", code, errOut)
	}
	if out := r.cli.must("read", id); !strings.Contains(out, "old work") {
		t.Fatalf("an archived session is not readable:\n%s", out)
	}
	if out := r.cli.must("rm", id, "--purge"); !strings.Contains(out, "deleted "+id) {
		t.Fatalf("cast rm --purge: %q", out)
	}
	if keys := keysOf(id); len(keys) != 0 {
		t.Fatalf("purge left keys: %v", keys)
	}
	if _, errOut, code := r.cli.run("read", id); code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("read after purge: exit %d %q", code, errOut)
	}
	if len(keysOf(kept)) == 0 {
		t.Fatal("purge deleted another session's keys")
	}

	busy := strings.TrimSpace(r.cli.must("new", "--agent", "codex", "--node", "n1", "--cwd", t.TempDir(), "work for a while"))
	r.waitState(busy, castv1.SessionState_SESSION_STATE_RUNNING)
	for _, args := range [][]string{{"rm", busy}, {"rm", busy, "--purge"}} {
		if _, errOut, code := r.cli.run(args...); code != 1 || !strings.Contains(errOut, "cast interrupt -s "+busy) {
			t.Fatalf("cast %v on a running session: exit %d %q", args, code, errOut)
		}
	}
	r.cli.must("interrupt", "-s", busy)
	testharness.WaitFor(t, 30*time.Second, "turn stopped", func() bool {
		s, err := r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{Id: busy})
		return err == nil && s.State != castv1.SessionState_SESSION_STATE_RUNNING
	})
	r.cli.must("rm", busy, "--purge")
	if keys := keysOf(busy); len(keys) != 0 {
		t.Fatalf("purge left keys: %v", keys)
	}
}
