package custody

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fsutil"
)

// Service is the custody record as a node reaches it (the control plane's
// vault).
type Service interface {
	// Get returns the whole credential, refresh token included: for the
	// custodian only.
	Get(ctx context.Context, agent, account string) ([]byte, Token, error)
	// AccessOnly returns the credential without its refresh token.
	AccessOnly(ctx context.Context, agent, account string) ([]byte, Token, error)
	// Put stores raw if it is newer than the stored one (ErrNotNewer).
	Put(ctx context.Context, agent, account string, raw []byte, by string) (Token, error)
	BeginRefresh(ctx context.Context, agent, account, node string, issued time.Time) error
	EndRefresh(ctx context.Context, agent, account, node string) error
}

// Refresher runs the agent's own CLI refresh on the credential file at
// path, which the CLI rewrites in place.
type Refresher interface {
	Refresh(ctx context.Context, agent, path string) error
}

// NodeConfig configures a node's part in custody.
type NodeConfig struct {
	Name string
	// Dir is the node's private custody folder: the custodian's copy of
	// each account it holds lives in Dir/<agent>/<account>/, where only
	// the refresher's CLI reads it.
	Dir string
	// Margin is how long before the access token's expiry the custodian
	// refreshes and nodes take the new token. It must exceed the longest
	// turn start plus a custodian handover (lease TTL).
	Margin time.Duration
	Now    func() time.Time
}

// DefaultMargin refreshes well before either CLI would on its own (Claude
// 5 minutes before expiry, Codex at expiry).
const DefaultMargin = 30 * time.Minute

// Validate checks c and fills defaults.
func (c *NodeConfig) Validate() error {
	if c.Name == "" || c.Dir == "" {
		return fmt.Errorf("custody: node name and dir are required")
	}
	if c.Margin <= 0 {
		c.Margin = DefaultMargin
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return nil
}

// Node is one node's side of custody: as custodian it refreshes through
// the CLI and stores the result; for every session it supplies the CLI's
// file without the refresh token, reporting a file the CLI rewrote.
type Node struct {
	cfg     NodeConfig
	svc     Service
	formats func(agent string) (Format, error)
	refresh Refresher
	lg      *zap.Logger

	mu      sync.Mutex
	written map[string]supplied // CLI file path -> what this node last wrote there
}

type supplied struct {
	agent, account string
	tok            Token
}

// NewNode returns a node's custody part.
func NewNode(cfg NodeConfig, svc Service, formats func(string) (Format, error), r Refresher, lg *zap.Logger) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Node{cfg: cfg, svc: svc, formats: formats, refresh: r, lg: lg, written: map[string]supplied{}}, nil
}

// custodyPath is where the custodian keeps agent/account's whole
// credential for its CLI to refresh.
func (n *Node) custodyPath(agent, account string, f Format) string {
	return filepath.Join(n.cfg.Dir, agent, account, f.File())
}

// Reconcile reports a credential an earlier refresh left in the custody
// folder (the node died before storing it) and clears this node's refresh
// record. A node runs it on start and before each refresh.
func (n *Node) Reconcile(ctx context.Context, agent, account string) error {
	f, err := n.formats(agent)
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(n.custodyPath(agent, account, f))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err == nil {
		tok, err := n.svc.Put(ctx, agent, account, raw, n.cfg.Name)
		switch {
		case err == nil:
			n.lg.Info("custody: reported a credential refreshed before a restart",
				zap.String("agent", agent), zap.String("account", account), zap.String("access", tok.AccessID))
		case errs.HasReason(err, ReasonNotInCustody):
			// The account was removed: its last login goes too.
			n.lg.Info("custody: removing the copy of an account custody no longer holds",
				zap.String("agent", agent), zap.String("account", account))
			return os.RemoveAll(filepath.Dir(n.custodyPath(agent, account, f)))
		case !IsNotNewer(err):
			return err
		}
	}
	return n.svc.EndRefresh(ctx, agent, account, n.cfg.Name)
}

// ErrNoRefresh: the CLI ran but left no newer credential.
var ErrNoRefresh = errors.New("custody: the CLI's refresh left no newer credential")

// Custody is the custodian's turn for agent/account: refresh through the
// CLI when the access token expires within the margin, and store the
// rotated credential. It returns whether it refreshed.
func (n *Node) Custody(ctx context.Context, agent, account string) (bool, error) {
	if err := n.Reconcile(ctx, agent, account); err != nil {
		return false, err
	}
	raw, tok, err := n.svc.Get(ctx, agent, account)
	if err != nil {
		return false, err
	}
	if !tok.HasRefresh || !Expiring(tok, n.cfg.Now(), n.cfg.Margin) {
		return false, nil
	}
	f, err := n.formats(agent)
	if err != nil {
		return false, err
	}
	path := n.custodyPath(agent, account, f)
	if err := fsutil.WritePrivate(path, raw); err != nil {
		return false, err
	}
	if err := n.svc.BeginRefresh(ctx, agent, account, n.cfg.Name, tok.Issued); err != nil {
		return false, err
	}
	rerr := n.refresh.Refresh(ctx, agent, path)
	// Whatever the CLI wrote is reported, even after an error: a rotated
	// refresh token is only in that file now.
	next, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	ntok, perr := f.Parse(next)
	if perr != nil || !ntok.Issued.After(tok.Issued) {
		if err := n.svc.EndRefresh(ctx, agent, account, n.cfg.Name); err != nil {
			return false, err
		}
		return false, errors.Join(ErrNoRefresh, rerr, perr)
	}
	if _, err := n.svc.Put(ctx, agent, account, next, n.cfg.Name); err != nil && !IsNotNewer(err) {
		return false, err // the record stays: Reconcile reports the file later
	}
	n.lg.Info("custody: refreshed through the CLI",
		zap.String("agent", agent), zap.String("account", account), zap.String("access", ntok.AccessID), zap.Time("expires", ntok.Expires))
	return true, n.svc.EndRefresh(ctx, agent, account, n.cfg.Name)
}

// ErrExpired: the only access token custody has is expired (the custodian
// has not refreshed it, or the family needs a fresh login).
var ErrExpired = errors.New("custody: the account's access token has expired and no newer one is in custody")

// Supply writes what the CLI reading path needs to run on agent/account:
// the access token, no refresh token. A file the CLI rewrote since this
// node last wrote it (it refreshed on its own) is reported first and kept
// by the record only if newer. It returns the token the CLI will use.
func (n *Node) Supply(ctx context.Context, agent, account, path string) (Token, error) {
	f, err := n.formats(agent)
	if err != nil {
		return Token{}, err
	}
	onDisk, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Token{}, err
	}
	var diskTok Token
	if err == nil {
		diskTok, _ = f.Parse(onDisk)
		if err := n.reportRewrite(ctx, agent, account, path, onDisk, diskTok); err != nil {
			return Token{}, err
		}
	}
	acc, tok, err := n.svc.AccessOnly(ctx, agent, account)
	if err != nil {
		return Token{}, err
	}
	if !tok.Expires.IsZero() && !n.cfg.Now().Before(tok.Expires) {
		return tok, ErrExpired
	}
	if diskTok.AccessID == tok.AccessID && !diskTok.HasRefresh {
		n.remember(path, agent, account, tok)
		return tok, nil // already there
	}
	if err := fsutil.WritePrivate(path, acc); err != nil {
		return Token{}, err
	}
	n.remember(path, agent, account, tok)
	return tok, nil
}

func (n *Node) remember(path, agent, account string, tok Token) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.written[path] = supplied{agent: agent, account: account, tok: tok}
}

// reportRewrite sends a file the CLI rewrote to the record. Only a file
// this node wrote for the same account counts: anything else there (the
// user's own login) is not this account's.
func (n *Node) reportRewrite(ctx context.Context, agent, account, path string, raw []byte, tok Token) error {
	n.mu.Lock()
	last, ok := n.written[path]
	n.mu.Unlock()
	if !ok || last.agent != agent || last.account != account || tok.AccessID == last.tok.AccessID || !tok.Issued.After(last.tok.Issued) {
		return nil
	}
	if _, err := n.svc.Put(ctx, agent, account, raw, n.cfg.Name); err != nil && !IsNotNewer(err) {
		return err
	}
	n.lg.Info("custody: reported a credential the CLI refreshed on its own",
		zap.String("agent", agent), zap.String("account", account), zap.String("access", tok.AccessID))
	return nil
}
