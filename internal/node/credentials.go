package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/custody"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fsutil"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// Fleet accounts on the node: every session of an agent that has no
// account of its own reads one credential store, in the agent's default
// folder. SetCredential names the fleet account it must hold; the node
// fetches the secret, rewrites the file (0600, atomically, under a lock)
// and runs the turns that parked on a usage limit again. Claude re-reads
// .credentials.json while it runs; a Codex turn reads auth.json at start.

// credentialPath is where the agent's shared store lives on this node: its
// config folder as its turns see it (the user's own with a shared home).
func (c Config) credentialPath(agent string) (string, error) {
	a, _ := agents.Lookup(agent)
	fl := a.Login.Fleet
	if fl == nil {
		return "", fmt.Errorf("fleet accounts do not cover %s", agent)
	}
	s := c.agentSetup(agent)
	return filepath.Join(c.newTurn(agent, s, s.Env).AgentDir(), fl.File), nil
}

// ownsCredential says whether cast may rewrite the store at path: one
// under the node's data dir is cast's own; any other (the user's login, a
// home the agents config points at) only with --fleet-accounts.
func (c Config) ownsCredential(path string) bool {
	rel, err := filepath.Rel(c.DataDir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// checkCredentialStore refuses a store this node may not rewrite, saying
// how to allow it.
func (c Config) checkCredentialStore(agent, path string) error {
	if c.FleetAccounts || c.ownsCredential(path) {
		return nil
	}
	return fmt.Errorf("node %s will not rewrite %s (the %s login it runs with is the user's own); start the node with --fleet-accounts (controlplane --dev: --node-fleet-accounts) to let fleet accounts replace it, keeping a backup", c.Name, path, agent)
}

// writesFleetLogins says whether a SetCredential for agent would be
// written here (AgentInstall.fleet_logins): `cast account add` warns when
// no connected node would.
func (c Config) writesFleetLogins(agent string) bool {
	path, err := c.credentialPath(agent)
	return err == nil && c.checkCredentialStore(agent, path) == nil
}

// credentialBackupDir is where the stores fleet accounts replace are kept.
func (c Config) credentialBackupDir() string { return filepath.Join(c.DataDir, "credential-backups") }

// fleetNotice logs, at start, which stores fleet accounts may rewrite on
// this node and where their backups go.
func (a *Daemon) fleetNotice() {
	if !a.cfg.FleetAccounts {
		return
	}
	for _, agent := range agents.FleetAgents() {
		if path, err := a.cfg.credentialPath(agent); err == nil && !a.cfg.ownsCredential(path) {
			a.lg.Warn("fleet accounts may rewrite this credential store; each version replaced is backed up first",
				zap.String("agent", agent), zap.String("path", path), zap.String("backups", a.cfg.credentialBackupDir()))
		}
	}
}

// setCredential applies a SetCredential command. An epoch the node has
// already written is ignored, so a resent command does nothing.
func (a *Daemon) setCredential(ctx context.Context, sc *castv1.SetCredential) error {
	if sc.Epoch <= a.st.fleet(sc.Agent).Epoch {
		return nil
	}
	path, err := a.cfg.credentialPath(sc.Agent)
	if err != nil {
		return err
	}
	if err := a.cfg.checkCredentialStore(sc.Agent, path); err != nil {
		return err
	}
	fctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	// Under custodyMu: custodyLoop makes a waiting switch under it too.
	a.custodyMu.Lock()
	defer a.custodyMu.Unlock()
	if p := a.pending[sc.Agent]; p != nil && sc.Epoch < p.Epoch {
		// A waiting switch is newer: its epoch is not recorded until its
		// store is written, so the check above let an older command
		// (NodeHello's, queued after the switch) through.
		return nil
	}
	delete(a.pending, sc.Agent)
	if a.custodyCovers(sc.Agent) {
		// The store gets the access token only; the login stays with its
		// custodian (custody.go).
		err := a.supply(fctx, sc.Agent, sc.Account)
		if err == nil {
			return a.credentialWritten(sc)
		}
		if errors.Is(err, custody.ErrExpired) {
			a.waitForRefresh(sc)
			return nil
		}
		reason := client.ReasonOf(err)
		if e, ok := errs.As(err); ok {
			reason = e.Reason
		}
		if custodyAgain(err) {
			// A refused command is not sent again: the custody loop
			// supplies the account each round and records the switch once
			// its store is written.
			a.lg.Warn("custody: supplying the new account's access token failed; trying again each custody round",
				zap.String("agent", sc.Agent), zap.String("account", sc.Account), zap.Error(err))
			a.waitForCustody(sc)
			return nil
		}
		if !custody.Unavailable(reason) {
			return fmt.Errorf("supply %s access token: %w", sc.Agent, err)
		}
		a.lg.Warn("custody does not hold this account; copying its stored credential instead",
			zap.String("agent", sc.Agent), zap.String("account", sc.Account), zap.String("reason", reason))
	}
	err = a.copyCredential(fctx, sc, path)
	if custodyAgain(err) {
		// As a failed supply above: the ack is never answered, so the
		// custody loop copies it (copyWaiting) each round instead.
		a.lg.Warn("fetching the new account's stored credential failed; trying again each custody round",
			zap.String("agent", sc.Agent), zap.String("account", sc.Account), zap.Error(err))
		a.waitForCustody(sc)
		return nil
	}
	return err
}

// copyCredential writes sc's account's stored credential, fetched with
// its grant, into the agent's store at path.
func (a *Daemon) copyCredential(ctx context.Context, sc *castv1.SetCredential, path string) error {
	resp, err := a.cli.Nodes.FetchCredential(ctx, &castv1.FetchCredentialRequest{Node: a.cfg.Name, Agent: sc.Agent, Account: sc.Account, Grant: sc.Grant})
	if err != nil {
		return fmt.Errorf("fetch %s credential: %w", sc.Agent, err)
	}
	backup := ""
	if !a.cfg.ownsCredential(path) {
		backup = filepath.Join(a.cfg.credentialBackupDir(), sc.Agent)
	}
	saved, err := writeCredential(path, resp.Credential, backup)
	if err != nil {
		return err
	}
	a.logBackup(sc.Agent, path, saved)
	return a.credentialWritten(sc)
}

// logBackup says where the store's previous version went (saved: "" when
// nothing was backed up).
func (a *Daemon) logBackup(agent, path, saved string) {
	if saved != "" {
		a.lg.Warn("credential store replaced by a fleet account; the previous one is backed up",
			zap.String("agent", agent), zap.String("path", path), zap.String("backup", saved))
	}
}

// credentialWritten records that the store holds sc's account and runs
// the sessions that parked on a usage limit again.
func (a *Daemon) credentialWritten(sc *castv1.SetCredential) error {
	// A crash here leaves the file newer than state.json: the restarted
	// node takes the same epoch again when it connects (NodeHello).
	a.failpoint("node.after-credential")
	var wake []string
	err := a.st.setFleet(sc.Agent, fleetCred{Account: sc.Account, Epoch: sc.Epoch}, func(m map[string]*owned) {
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
// With backupDir set, the store it replaces is first copied there (0600,
// named by time) unless it already holds cred; saved names that copy.
func writeCredential(path string, cred []byte, backupDir string) (saved string, err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", err
	}
	lf, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", err
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing releases it too
	if backupDir != "" {
		if saved, err = backupCredential(path, cred, backupDir); err != nil {
			return "", fmt.Errorf("back up %s before replacing it: %w", path, err)
		}
	}
	return saved, fsutil.WriteFileAtomic(path, cred, 0o600)
}

// keepBackups is how many replaced versions of one store are kept.
const keepBackups = 10

// backupCredential copies the store at path into dir before it is replaced
// ("" when there is none, it already holds next, or the newest copy is
// already this one: a supply that failed and the copy after it back up the
// same store), keeping keepBackups copies. The oldest copy is never pruned:
// it is the store as it was before cast first replaced it, the user's own
// login, while the ones after it are fleet accounts the vault holds anyway.
func backupCredential(path string, next []byte, dir string) (string, error) {
	old, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && bytes.Equal(old, next)) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	matches, _ := filepath.Glob(filepath.Join(dir, filepath.Base(path)+".*"))
	sort.Strings(matches) // the names sort by time
	if n := len(matches); n > 0 {
		if last, err := os.ReadFile(matches[n-1]); err == nil && bytes.Equal(last, old) {
			return "", nil
		}
	}
	name := filepath.Base(path) + "." + time.Now().UTC().Format("20060102T150405.000000000Z")
	saved := filepath.Join(dir, name)
	if err := fsutil.WriteFileAtomic(saved, old, 0o600); err != nil {
		return "", err
	}
	matches = append(matches, saved)
	for len(matches) > keepBackups {
		_ = os.Remove(matches[1])
		matches = append(matches[:1], matches[2:]...)
	}
	return saved, nil
}
