package nodeagent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/fsutil"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/runner"
)

// Fleet accounts on the node: every session of an agent that has no
// account of its own reads one credential store, in the agent's default
// folder. SetCredential names the fleet account it must hold; the node
// fetches the secret, rewrites the file (0600, atomically, under a lock)
// and runs the turns that parked on a usage limit again. Claude re-reads
// .credentials.json while it runs; a Codex turn reads auth.json at start.

// credentialFiles name each agent's store inside its config folder.
var credentialFiles = map[string]string{
	"claude": ".credentials.json",
	"codex":  "auth.json",
}

// credentialPath is where the agent's shared store lives on this node: its
// config folder as the agents config sets it, else the runner's default.
func (c Config) credentialPath(agent string) (string, error) {
	file, ok := credentialFiles[agent]
	if !ok {
		return "", fmt.Errorf("fleet accounts do not cover %s", agent)
	}
	s := c.agentSetup(agent)
	a, _ := agents.Lookup(agent)
	dir := runner.EnvValue(s.Env, a.HomeEnv)
	if dir == "" {
		dir = runner.NativeHome(s.Home, agent)
	}
	return filepath.Join(dir, file), nil
}

// setCredential applies a SetCredential command. An epoch the node has
// already written is ignored, so a resent command does nothing.
func (a *Agent) setCredential(ctx context.Context, sc *castv1.SetCredential) error {
	if sc.Epoch <= a.st.fleet(sc.Agent).Epoch {
		return nil
	}
	path, err := a.cfg.credentialPath(sc.Agent)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	resp, err := a.cli.Nodes.FetchCredential(fctx, &castv1.FetchCredentialRequest{Node: a.cfg.Name, Agent: sc.Agent, Account: sc.Account, Grant: sc.Grant})
	if err != nil {
		return fmt.Errorf("fetch %s credential: %w", sc.Agent, err)
	}
	if err := writeCredential(path, resp.Credential); err != nil {
		return err
	}
	// A crash here leaves the file newer than state.json: the restarted
	// node takes the same epoch again when it connects (NodeHello).
	a.failpoint("node.after-credential")
	var wake []string
	err = a.st.setFleet(sc.Agent, fleetCred{Account: sc.Account, Epoch: sc.Epoch}, func(m map[string]*owned) {
		for id, o := range m {
			if o.Parked && o.Agent == sc.Agent && o.Account == "" {
				o.Parked, o.FailedSeq = false, 0
				wake = append(wake, id)
			}
		}
	})
	if err != nil {
		return err
	}
	a.lg.Info("fleet credential written", zap.String("agent", sc.Agent), zap.String("account", sc.Account),
		zap.Int64("epoch", sc.Epoch), zap.Int("parked_sessions_resumed", len(wake)))
	for _, id := range wake {
		a.wake(id)
	}
	return nil
}

// writeCredential replaces the store atomically under an exclusive lock on
// a sibling file, so two writers (two node processes sharing a folder by
// mistake, or a CLI's own refresh taking the same lock) never interleave.
func writeCredential(path string, cred []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	lf, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing releases it too
	return fsutil.WriteFileAtomic(path, cred, 0o600)
}
