package node

import (
	"os"
	"os/exec"
	"syscall"
	"testing"

	"go.uber.org/zap"
)

// A real child process, in its own process group with a turn's token and
// session in its environment, is found by both: the token finds its
// group, the session confirms a recorded group is that session's turn.
func TestTurnDiscoveryFindsARealChild(t *testing.T) {
	token := newTurnToken()
	cmd := exec.Command("sleep", "60")
	cmd.Env = append(os.Environ(), turnTokenEnv+"="+token, "CAST_SESSION=s-orphan")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid // its own group: pgid == pid

	for _, tc := range []struct {
		name  string
		found bool
		want  bool
	}{
		{"its token finds its group", turnGroups(token)[pid], true},
		{"another token finds nothing", len(turnGroups(newTurnToken())) > 0, false},
		{"an empty token finds nothing", len(turnGroups("")) > 0, false},
		{"its session is its own", ownTurn(pid, "s-orphan"), true},
		{"another session's is not", ownTurn(pid, "s-other"), false},
		{"this test's own process is no turn", ownTurn(os.Getpid(), "s-orphan"), false},
	} {
		if tc.found != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, tc.found, tc.want)
		}
	}
}

// A node killed mid-turn right after a switch was recorded: the markers
// are the old agent's turn's, and its native session may hold the prompt,
// so a restart rebuilds every agent's native session of the session, not
// only the current agent's.
func TestOrphanedTurnStalesEveryAgentsNativeSession(t *testing.T) {
	st, err := loadState(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.assign("s1", func(o *owned) {
		o.Agent, o.TurnToken = "claude", newTurnToken() // no process carries it
		o.Native = map[string]*nativeSession{"pi": {ID: "p", KnownUpto: 29}, "claude": {ID: "c", KnownUpto: 29}}
	}); err != nil {
		t.Fatal(err)
	}
	a := &Daemon{st: st, lg: zap.NewNop()}
	a.stopOrphans()
	o, _ := st.get("s1")
	if o.TurnToken != "" {
		t.Fatalf("the turn's token is still recorded: %q", o.TurnToken)
	}
	for agent, ns := range o.Native {
		if !ns.Stale {
			t.Errorf("%s's native session is not marked for a rebuild", agent)
		}
	}
}
