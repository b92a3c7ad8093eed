package nodeagent

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// stopOrphans ends the turns a previous run of this node left behind (it
// was killed with -9 mid-turn: the agent CLIs run in their own process
// groups and outlive it). Each is checked to really be that session's turn
// (CAST_SESSION in its environment) so a reused pid is never killed. The
// turns then run again on a rebuilt native session (the old one may hold
// the prompt already); their synced messages have stable client ids, so
// nothing is stored twice.
func (a *Agent) stopOrphans() {
	a.st.mu.Lock()
	running := map[string]int{}
	for id, o := range a.st.Sessions {
		if o.RunningPGID > 0 {
			running[id] = o.RunningPGID
		}
	}
	a.st.mu.Unlock()
	for id, pgid := range running {
		if ownTurn(pgid, id) {
			a.lg.Warn("stopping a turn left by a previous node run", zap.String("session", id), zap.Int("pgid", pgid))
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			for i := 0; i < 40 && syscall.Kill(-pgid, 0) == nil; i++ {
				time.Sleep(50 * time.Millisecond)
			}
		}
		// The native session may hold half a turn (or a whole one whose
		// rows never reached the neutral copy); the prompt is still
		// undelivered, so the rerun must not find it there too.
		_ = a.st.update(func(m map[string]*owned) {
			s := m[id]
			s.RunningPGID = 0
			if ns := s.Native[s.Agent]; ns != nil {
				ns.Stale = true
			}
		})
	}
}

// ownTurn reports whether process pid runs with CAST_SESSION=sessionID.
func ownTurn(pid int, sessionID string) bool {
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return false
	}
	want := []byte("CAST_SESSION=" + sessionID)
	for _, kv := range bytes.Split(env, []byte{0}) {
		if bytes.Equal(kv, want) {
			return true
		}
	}
	return false
}
