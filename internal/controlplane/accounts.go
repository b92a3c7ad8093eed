package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fleet"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/metrics"
	"github.com/cast-dev/cast/internal/secrets"
	"github.com/cast-dev/cast/internal/validate"
)

// newFleet opens the secrets key and builds the fleet account manager. Without a key the manager runs but
// refuses to store or hand out credentials.
func (s *Server) newFleet() (*fleet.Manager, error) {
	box, err := s.openBox()
	if err != nil {
		return nil, err
	}
	m := metrics.NewFleet(s.reg)
	// At 0 for every agent fleet accounts work for, so increase() and a
	// dashboard see the first limit.
	metrics.Preinit(m.Limited, agents.FleetAgents())
	metrics.Preinit(m.Accounts, agents.FleetAgents(), []string{"open", "limited"})
	metrics.Preinit(m.Switches, agents.FleetAgents(), fleet.SwitchReasons)
	cfg := s.cfg.Fleet
	if s.vault != nil { // a nil *store.Vault would make a non-nil interface
		cfg.Custody = s.vault
	}
	return fleet.New(s.store, box, cfg, s.lg.Named("fleet"), m)
}

// SecretsKeyEnv holds the secrets key itself (hex), instead of a file.
const SecretsKeyEnv = "CAST_SECRETS_KEY"

// secretsKeyPath is the secrets key file: SecretsKeyFile, else with Dev
// DataDir/secrets.key; "" for none (or when SecretsKey gives the key itself).
func (s *Server) secretsKeyPath() string {
	if s.cfg.SecretsKey != "" {
		return ""
	}
	if s.cfg.SecretsKeyFile == "" && s.cfg.Dev && s.cfg.DataDir != "" {
		return filepath.Join(s.cfg.DataDir, SecretsKeyFileName)
	}
	return s.cfg.SecretsKeyFile
}

// makeSecretsKey creates the secrets key file at the start when it does
// not exist and the store holds nothing sealed yet (the first start). A
// new key beside sealed data could not open it, and what it sealed the
// other replicas could not open: then the start is refused, naming the
// file. Only here is a key made; openBox, run on each use, never makes one.
func (s *Server) makeSecretsKey(ctx context.Context) error {
	path := s.secretsKeyPath()
	if path == "" {
		return nil
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil // there (openBox says what is wrong with it, if anything)
	}
	sealed, err := s.sealedInStore(ctx)
	if err != nil {
		return err
	}
	if sealed != "" {
		return errs.New(errs.KindFailedPrecondition, errs.ReasonNoSecretsKey,
			"the secrets key file %s does not exist, but the store holds %s sealed with a secrets key: give this replica the key the others use (--secrets-key-file or %s); a new key could not open it", path, sealed, SecretsKeyEnv)
	}
	if _, err := secrets.LoadOrCreateKey(path); err != nil {
		return err
	}
	// What it seals cannot be opened without it; say where it is.
	s.lg.Warn("created a new secrets key: back it up, apart from the data dir", zap.String("path", path))
	return nil
}

// sealedInStore names what the store holds sealed with the secrets key
// (the TLS CA's key, fleet credentials, logins in token custody, which
// outlive their account when its removal stopped halfway); "" for nothing.
func (s *Server) sealedInStore(ctx context.Context) (string, error) {
	rec, ok, err := s.store.GetCA(ctx)
	if err != nil {
		return "", err
	}
	if ok && len(rec.SealedKey) > 0 {
		return "the TLS CA's key", nil
	}
	for _, o := range rec.Others {
		if len(o.SealedKey) > 0 {
			return "a rotated TLS CA's key", nil
		}
	}
	as, err := s.store.ListAccounts(ctx, "")
	if err != nil {
		return "", err
	}
	if len(as) > 0 {
		return fmt.Sprintf("%d fleet account(s)", len(as)), nil
	}
	n, err := s.store.CustodyLogins(ctx)
	if err != nil {
		return "", err
	}
	if n > 0 {
		return fmt.Sprintf("%d login(s) in token custody", n), nil
	}
	return "", nil
}

// openBox opens the secrets key (SecretsKey, else secretsKeyPath); nil
// without one. Fleet credentials and the TLS CA's key are sealed with it.
// It reads the key on each use and never makes one (makeSecretsKey did at
// the start if it was to be made): a key file gone since is refused with
// SECRETS_KEY_MISSING, never replaced by a key nothing sealed opens with.
func (s *Server) openBox() (*secrets.Box, error) {
	if s.cfg.SecretsKey != "" {
		key, err := secrets.ParseKey([]byte(s.cfg.SecretsKey), SecretsKeyEnv)
		if err != nil {
			return nil, err
		}
		return secrets.NewBox(key)
	}
	path := s.secretsKeyPath()
	if path == "" {
		return nil, nil
	}
	key, err := secrets.LoadKey(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errs.New(errs.KindFailedPrecondition, errs.ReasonNoSecretsKey,
			"the secrets key file %s is gone: restore it (the key the other replicas use); a new key could not open what is sealed", path)
	}
	if err != nil {
		return nil, err
	}
	return secrets.NewBox(key)
}

// accountService is the thin gRPC edge of the fleet manager.
type accountService struct {
	castv1.UnimplementedAccountServiceServer
	s *Server
}

// maxCredentialBytes bounds one stored credential (an agent's auth file).
const maxCredentialBytes = 256 << 10

func validAccount(agent, name string) error {
	return refuse(validate.Need(validate.Name, "agent", agent), validate.Need(validate.Name, "name", name))
}

func (h *accountService) PutAccount(ctx context.Context, req *castv1.PutAccountRequest) (*castv1.Account, error) {
	if err := validAccount(req.Agent, req.Name); err != nil {
		return nil, err
	}
	if len(req.Credential) > maxCredentialBytes {
		return nil, invalid("credential is %d bytes; an agent's credential file is under %d KiB", len(req.Credential), maxCredentialBytes>>10)
	}
	a, err := h.s.fleet.Put(ctx, req.Agent, req.Name, req.Credential)
	return a, toStatus(h.s.lg, err)
}

func (h *accountService) ListAccounts(ctx context.Context, req *castv1.ListAccountsRequest) (*castv1.ListAccountsResponse, error) {
	if err := refuse(validate.Check(validate.Name, "agent", req.Agent)); err != nil {
		return nil, err
	}
	page, err := pager(req.PageSize, req.PageToken, "accounts:"+scope(req.Agent), func(a *castv1.Account) string { return a.Agent + "\x00" + a.Name })
	if err != nil {
		return nil, err
	}
	as, err := h.s.fleet.List(ctx, req.Agent)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	as, next, err := page(as)
	if err != nil {
		return nil, err
	}
	// Each page carries the listed agents' fleet policies: a handful.
	fleets, err := h.s.fleet.Fleets(ctx, req.Agent)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	return &castv1.ListAccountsResponse{Accounts: as, Fleet: fleets, NextPageToken: next}, nil
}

func (h *accountService) DeleteAccount(ctx context.Context, req *castv1.DeleteAccountRequest) (*castv1.DeleteAccountResponse, error) {
	if err := validAccount(req.Agent, req.Name); err != nil {
		return nil, err
	}
	if err := h.s.fleet.Delete(ctx, req.Agent, req.Name); err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	return &castv1.DeleteAccountResponse{}, nil
}

func (h *accountService) UseAccount(ctx context.Context, req *castv1.UseAccountRequest) (*castv1.Account, error) {
	if err := validAccount(req.Agent, req.Name); err != nil {
		return nil, err
	}
	a, err := h.s.fleet.Use(ctx, req.Agent, req.Name)
	return a, toStatus(h.s.lg, err)
}

func (h *accountService) SetAccountPolicy(ctx context.Context, req *castv1.SetAccountPolicyRequest) (*castv1.Account, error) {
	if err := refuse(validAccount(req.Agent, req.Name), validate.Check(validate.Name, "policy", req.Policy)); err != nil {
		return nil, err
	}
	a, err := h.s.fleet.SetPolicy(ctx, req.Agent, req.Name, req.Policy)
	return a, toStatus(h.s.lg, err)
}

func (h *accountService) AnswerAccountChoice(ctx context.Context, req *castv1.AnswerAccountChoiceRequest) (*castv1.AnswerAccountChoiceResponse, error) {
	if err := refuse(validate.Need(validate.Name, "agent", req.Agent)); err != nil {
		return nil, err
	}
	active, sessions, err := h.s.fleet.Answer(ctx, req.Agent, req.Approve)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	return &castv1.AnswerAccountChoiceResponse{Active: active, Sessions: sessions}, nil
}

// FetchCredential hands a fleet account's credential to a connected node
// (the node writes it into the agent's shared store). The secret is never
// logged.
func (h *nodeService) FetchCredential(ctx context.Context, req *castv1.FetchCredentialRequest) (*castv1.FetchCredentialResponse, error) {
	if err := refuse(
		validate.Need(validate.Name, "node", req.Node),
		validAccount(req.Agent, req.Account),
		validate.Need(validate.ClientID, "grant", req.Grant),
	); err != nil {
		return nil, err
	}
	ok, err := h.s.store.NodeConnected(ctx, req.Node)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	if !ok {
		return nil, toStatus(h.s.lg, errs.New(errs.KindFailedPrecondition, errs.ReasonNodeNotConn,
			"node %q is not connected; credentials go only to connected nodes", req.Node).With("node", req.Node))
	}
	cred, err := h.s.fleet.Credential(ctx, req.Node, req.Agent, req.Account, req.Grant)
	if err == nil {
		cred, err = h.s.custodyCopy(ctx, req.Agent, req.Account, cred)
	}
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	h.s.lg.Info("fleet credential fetched", zap.String("node", req.Node), zap.String("agent", req.Agent), zap.String("account", req.Account))
	return &castv1.FetchCredentialResponse{Credential: cred}, nil
}
