package node

import (
	"crypto/rand"
	"encoding/hex"
	"slices"
	"syscall"
	"time"

	"github.com/shirou/gopsutil/v4/process"
	"go.uber.org/zap"
)

// turnTokenEnv names the variable that marks a turn's CLI with the turn's
// token (owned.TurnToken).
const turnTokenEnv = "CAST_TURN"

// newTurnToken is a token no other turn has.
func newTurnToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// stopOrphans ends the turns a previous run of this node left behind (it
// was killed with -9 mid-turn: the agent CLIs run in their own process
// groups and outlive it). A turn is found by its recorded process group,
// checked to really be that session's turn (CAST_SESSION in its
// environment) so a reused pid is never killed, and by its token (CAST_TURN
// in the environment of any process), recorded before the CLI started: a
// node killed between the CLI's start and the write of its process group
// left a CLI only the token finds, and that CLI would go on writing the
// native session the rerun uses. The turns then run again on a rebuilt
// native session (the old one may hold the prompt already); their synced
// messages have stable client ids, so nothing is stored twice.
func (a *Daemon) stopOrphans() {
	a.st.mu.Lock()
	running := map[string]*owned{}
	for id, o := range a.st.Sessions {
		if o.RunningPGID > 0 || o.TurnToken != "" {
			running[id] = &owned{RunningPGID: o.RunningPGID, TurnToken: o.TurnToken}
		}
	}
	a.st.mu.Unlock()
	for id, o := range running {
		groups := turnGroups(o.TurnToken)
		if o.RunningPGID > 0 && ownTurn(o.RunningPGID, id) {
			groups[o.RunningPGID] = true
		}
		for pgid := range groups {
			a.lg.Warn("stopping a turn left by a previous node run", zap.String("session", id), zap.Int("pgid", pgid))
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			for i := 0; i < 40 && syscall.Kill(-pgid, 0) == nil; i++ {
				time.Sleep(50 * time.Millisecond) // polls the group's end
			}
		}
		// The native session may hold half a turn (or a whole one whose
		// rows never reached the neutral copy); the prompt is still
		// undelivered, so the rerun must not find it there too. Every
		// agent's, not only the session's agent now: a switch recorded
		// while the turn ran leaves the markers of the old agent's turn,
		// whose native session holds the prompt (switching back later
		// sent it twice in one request; the delivery model test found it).
		_ = a.st.session(id, func(s *owned) {
			s.RunningPGID, s.TurnToken = 0, ""
			for _, ns := range s.Native {
				ns.Stale = true
			}
		})
	}
}

// runKilledAgain releases the turns held because a signal from outside
// ended their CLI (owned.Killed), so they run again once the node is
// connected (catchUp wakes every session it is assigned). A service
// manager's stop (systemd's control-group kill, a user session's end)
// sends SIGTERM to the node and its CLIs at once: a CLI whose exit the
// node saw before its own signal held its turn until the next message,
// and the restarted node left the message unanswered. Once per start: a
// CLI the OOM killer ends at every attempt is held again.
func (a *Daemon) runKilledAgain() {
	var killed []string
	for _, id := range a.st.ids() {
		if o, _ := a.st.get(id); o.Killed {
			killed = append(killed, id)
		}
	}
	for _, id := range killed {
		_ = a.st.session(id, func(s *owned) {
			if s.FailedSeq > s.DeliveredSeq {
				a.lg.Info("running again a turn held because its CLI was killed", zap.String("session", id), zap.Int64("seq", s.FailedSeq))
			}
			s.FailedSeq, s.Killed = 0, false
		})
	}
}

// ownTurn reports whether process pid runs with CAST_SESSION=sessionID.
func ownTurn(pid int, sessionID string) bool {
	p, err := process.NewProcess(int32(pid))
	return err == nil && hasEnv(p, "CAST_SESSION="+sessionID)
}

// turnGroups are the process groups of the processes that run with
// CAST_TURN=token (none for an empty token). The processes are listed
// through gopsutil, not /proc, so a macOS node finds them too.
func turnGroups(token string) map[int]bool {
	groups := map[int]bool{}
	if token == "" {
		return groups
	}
	procs, err := process.Processes()
	if err != nil {
		return groups
	}
	for _, p := range procs {
		if !hasEnv(p, turnTokenEnv+"="+token) {
			continue
		}
		if pgid, err := syscall.Getpgid(int(p.Pid)); err == nil && pgid > 1 && pgid != syscall.Getpgrp() {
			groups[pgid] = true
		}
	}
	return groups
}

// hasEnv reports whether p's environment holds kv (KEY=value); one this
// user may not read holds nothing.
func hasEnv(p *process.Process, kv string) bool {
	env, err := p.Environ()
	return err == nil && slices.Contains(env, kv)
}
