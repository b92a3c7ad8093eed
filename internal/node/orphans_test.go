package node

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
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
