package placement

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// folders is a FindFolder over a table: node -> its path for the folder
// ("" for none), recording who was asked.
type folders struct {
	mu    sync.Mutex
	have  map[string]string
	asked []string
}

// askedSoFar is who was asked until now: Place returns at the first yes,
// while the other questions may still be on their way.
func (f *folders) askedSoFar() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.asked...)
}

func (f *folders) find(_ context.Context, node, cwd string) (string, error) {
	f.mu.Lock()
	f.asked = append(f.asked, node)
	f.mu.Unlock()
	switch p := f.have[node]; p {
	case "":
		return "", fmt.Errorf("node %s: no folder %s here", node, cwd)
	case "silent":
		return "", errors.New("node " + node + " did not answer within 5s")
	default:
		return p, nil
	}
}

func TestPlace(t *testing.T) {
	// build1 sorts first: the old rule (first connected node with the
	// agent) sent every session there.
	nodes := []*castv1.Node{node("build1", true, "claude"), node("down", false, "claude"), node("laptop", true, "claude"),
		node("linux-1", true, "claude", "codex"), node("nocli", true, "pi")}
	for _, tc := range []struct {
		name   string
		want   Want
		have   map[string]string
		got    Placed
		msg    string // the whole refusal, when refused
		noAsks bool
	}{
		{name: "--node wins over the caller's node, in its path for the folder", want: Want{Node: "linux-1", Origin: "laptop", Agent: "claude", Cwd: "/u/app", CwdOnCaller: true},
			have: map[string]string{"laptop": "/u/app", "linux-1": "/srv/app"}, got: Placed{"linux-1", "/srv/app"}},
		{name: "--node without the folder: refused with its answer", want: Want{Node: "linux-1", Origin: "laptop", Agent: "claude", Cwd: "/u/app", CwdOnCaller: true},
			have: map[string]string{"laptop": "/u/app"},
			msg: "cannot run on node linux-1 in /u/app: node linux-1: no folder /u/app here; drop --node to run it on a node that has the folder, " +
				"or map the folder on linux-1 with node --map-path FROM=TO"},
		{name: "--node that does not answer: refused", want: Want{Node: "build1", Agent: "claude", Cwd: "/u/app", CwdOnCaller: true},
			have: map[string]string{"build1": "silent"},
			msg: "cannot run on node build1 in /u/app: node build1 did not answer within 5s; drop --node to run it on a node that has the folder, " +
				"or map the folder on build1 with node --map-path FROM=TO"},
		{name: "--node of an import keeps a folder it lacks", want: Want{Node: "linux-1", Agent: "grok", Cwd: "/u/gone", Import: true, CwdOnCaller: true},
			got: Placed{"linux-1", "/u/gone"}},
		{name: "a worker beside its parent, or an API caller's node path: nothing asked", want: Want{Node: "linux-1", Agent: "claude", Cwd: "/srv/app/wt"},
			got: Placed{"linux-1", "/srv/app/wt"}, noAsks: true},
		{name: "the caller's own node", want: Want{Origin: "laptop", Agent: "claude", Cwd: "/u/app"},
			got: Placed{"laptop", "/u/app"}, noAsks: true},
		{name: "no folder asked: the first node with the agent", want: Want{Agent: "claude"}, got: Placed{"build1", ""}, noAsks: true},
		{name: "no caller's node: the first that has the folder, at its path", want: Want{Agent: "claude", Cwd: "/u/app"},
			have: map[string]string{"laptop": "/u/app", "linux-1": "/srv/app"}, got: Placed{"laptop", "/u/app"}},
		{name: "caller's node down: mapped folder elsewhere", want: Want{Origin: "down", Agent: "claude", Cwd: "/u/app"},
			have: map[string]string{"linux-1": "/srv/app"}, got: Placed{"linux-1", "/srv/app"}},
		{name: "caller's node lacks the agent", want: Want{Origin: "nocli", Agent: "codex", Cwd: "/u/app"},
			have: map[string]string{"linux-1": "/srv/app"}, got: Placed{"linux-1", "/srv/app"}},
		{name: "a node that did not answer is passed over", want: Want{Agent: "claude", Cwd: "/u/app"},
			have: map[string]string{"build1": "silent", "linux-1": "/srv/app"}, got: Placed{"linux-1", "/srv/app"}},
		{name: "an import takes the first node when none has the folder", want: Want{Agent: "claude", Cwd: "/u/gone", Import: true},
			got: Placed{"build1", "/u/gone"}},
		{name: "an import of an agent no node has: any connected node", want: Want{Agent: "grok", Cwd: "/u/app", Import: true},
			got: Placed{"build1", "/u/app"}, noAsks: true},
		{name: "refused: no caller's node", want: Want{Agent: "codex", Cwd: "/u/app"},
			msg: "no connected node with the codex CLI has the folder /u/app: your cast context names no node on this machine (`node:`; `cast node join` writes it); " +
				"node linux-1: no folder /u/app here; run it on a node that has it with --node NAME, or map the folder with node --map-path FROM=TO"},
		{name: "refused: caller's node down", want: Want{Origin: "down", Agent: "claude", Cwd: "/u/app"}, have: map[string]string{"build1": "silent"},
			msg: "no connected node with the claude CLI has the folder /u/app: this machine's node down is not connected; node build1 did not answer within 5s; " +
				"node laptop: no folder /u/app here; node linux-1: no folder /u/app here; run it on a node that has it with --node NAME, or map the folder with node --map-path FROM=TO"},
		{name: "refused: caller's node lacks the agent", want: Want{Origin: "nocli", Agent: "codex", Cwd: "/u/app"},
			msg: "no connected node with the codex CLI has the folder /u/app: this machine's node nocli has no codex CLI; node linux-1: no folder /u/app here; " +
				"run it on a node that has it with --node NAME, or map the folder with node --map-path FROM=TO"},
		{name: "refused: caller's node unknown", want: Want{Origin: "gone", Agent: "codex", Cwd: "/u/app"},
			msg: "no connected node with the codex CLI has the folder /u/app: this machine's node gone (your cast context's node:) is not registered; node linux-1: no folder /u/app here; " +
				"run it on a node that has it with --node NAME, or map the folder with node --map-path FROM=TO"},
		{name: "no node has the agent: the agents refusal", want: Want{Origin: "laptop", Agent: "grok", Cwd: "/u/app"},
			msg: "no connected node has the grok CLI (connected: build1 (claude); laptop (claude); linux-1 (claude, codex); nocli (pi)); install it on a node, or pick another agent", noAsks: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &folders{have: tc.have}
			got, err := Place(context.Background(), nodes, tc.want, f.find)
			if tc.msg != "" {
				if !errs.HasReason(err, errs.ReasonNoNode) || err.Error() != tc.msg {
					t.Fatalf("Place = %v, %v; want the refusal\n%s", got, err, tc.msg)
				}
			} else if err != nil || got != tc.got {
				t.Fatalf("Place = %+v, %v; want %+v", got, err, tc.got)
			}
			asked := f.askedSoFar()
			if tc.noAsks && len(asked) > 0 {
				t.Errorf("asked %v for the folder; nothing needed asking", asked)
			}
			if strings.Contains(strings.Join(asked, ","), "nocli") || strings.Contains(strings.Join(asked, ","), "down") {
				t.Errorf("asked %v: a node without the agent, or not connected, was asked", asked)
			}
		})
	}
}

// requests is a store's record of request keys: key -> session.
type requests map[string]string

func (r requests) RequestedSession(_ context.Context, rk string) (string, bool, error) {
	if rk == "lookup-fails" {
		return "", false, errors.New("store unreachable")
	}
	id, ok := r[rk]
	return id, ok, nil
}

// A refused placement stands unless the request key already made a
// session: then the retry gets that session; a failed lookup is the
// error, and no key looks nothing up.
func TestRetried(t *testing.T) {
	refused := errors.New("node not connected")
	r := requests{"u/made": "ses_1"}
	for _, tc := range []struct {
		rk, id, err string
	}{
		{"u/made", "ses_1", ""},
		{"u/new", "", "node not connected"},
		{"", "", "node not connected"},
		{"lookup-fails", "", "store unreachable"},
	} {
		id, err := Retried(context.Background(), r, tc.rk, refused)
		if id != tc.id || fmt.Sprint(err) != cmp.Or(tc.err, "<nil>") {
			t.Errorf("Retried(%q) = %q, %v; want %q, %s", tc.rk, id, err, tc.id, cmp.Or(tc.err, "<nil>"))
		}
	}
}
