// Package etcdembed runs the embedded etcd of the default single-process
// setup. Of cast's three binaries only controlplane links it; the tests'
// harness (internal/testharness) does too, to start etcd for tests.
package etcdembed

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/netaddr"
)

// Config for the embedded member.
type Config struct {
	Dir        string // data dir (wal, snap); persists across restarts
	ClientAddr string // host:port for clients; port 0 picks a free one
	PeerAddr   string // host:port for the (single) peer URL; port 0 picks one
	QuotaBytes int64  // backend quota; the store refuses writes before it
	// CompactionRetention keeps this much history; older revisions are
	// compacted so the db does not grow without bound.
	CompactionRetention time.Duration
	// Name and InitialCluster ("name=peerURL,...") make the member one of
	// a cluster (the fault tests run three on loopback); empty: a cluster
	// of one named "cast".
	Name           string
	InitialCluster string
	// PasswordFile turns etcd auth on: the member gets a root user whose
	// generated password is kept in this file (0600) and reused on later
	// starts; clients without it are refused. A member of one only (the
	// control plane's). NoAuth runs without auth instead, for the test
	// harness's members and clusters; one of the two must be chosen.
	PasswordFile string
	NoAuth       bool
}

// Validate checks c: the client port is on loopback, and auth is chosen.
func (c Config) Validate() error {
	if c.PasswordFile == "" && !c.NoAuth {
		return errors.New("etcdembed: give PasswordFile (auth on) or NoAuth (tests only)")
	}
	if c.PasswordFile != "" && c.NoAuth {
		return errors.New("etcdembed: PasswordFile and NoAuth exclude each other")
	}
	if c.PasswordFile != "" && c.InitialCluster != "" {
		return errors.New("etcdembed: auth with PasswordFile is for a member of one; a cluster runs NoAuth")
	}
	for _, a := range []struct{ what, addr string }{{"client address", c.ClientAddr}, {"peer address", c.PeerAddr}} {
		if !netaddr.IsLoopback(a.addr) {
			return fmt.Errorf("etcdembed: %s %q is not a loopback address: the embedded etcd never listens beyond this host (run an external etcd with TLS for that)", a.what, a.addr)
		}
	}
	return nil
}

// Etcd is a running embedded member.
type Etcd struct {
	e         *embed.Etcd
	ClientURL string
	// PeerURL is https with auth: its port demands a client certificate
	// that no one can present (peertls.go).
	PeerURL string
	// User and Password are what clients connect with ("" with NoAuth).
	User, Password string
	closing        *atomic.Bool // set by Close: quiets the shutdown noise
}

// Start starts the member and waits until it serves. Ports it picked
// itself (port 0) are picked again if another process took one between the
// pick and etcd's bind.
func Start(ctx context.Context, c Config, lg *zap.Logger) (*Etcd, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		e, err := start(ctx, c, lg)
		if err == nil || attempt == 3 || !picksPorts(c) || !addrInUse(err) {
			return e, err
		}
		lg.Warn("embedded etcd: a picked port was taken before etcd bound it; picking again", zap.Error(err))
	}
}

// addrInUse: etcd does not always wrap the listener's error.
func addrInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}

// picksPorts reports whether Start chooses a port of c.
func picksPorts(c Config) bool {
	for _, a := range []string{c.ClientAddr, c.PeerAddr} {
		if _, port, err := net.SplitHostPort(a); err == nil && port == "0" {
			return true
		}
	}
	return false
}

// start is one try of Start.
func start(ctx context.Context, c Config, lg *zap.Logger) (*Etcd, error) {
	closing := new(atomic.Bool)
	cfg, cu, pu, err := embedConfig(c, lg, closing)
	if err != nil {
		return nil, err
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcdembed: start: %w", err)
	}
	if err := ready(ctx, e); err != nil {
		return nil, err
	}
	out := &Etcd{e: e, ClientURL: cu.String(), PeerURL: pu.String(), closing: closing}
	if c.PasswordFile != "" {
		pw, err := enableAuth(ctx, e.Server, c.PasswordFile)
		if err != nil {
			out.Close()
			return nil, err
		}
		out.User, out.Password = RootUser, pw
	}
	return out, nil
}

// embedConfig is etcd's configuration of the member c describes, with the
// client and peer URLs it listens on (their ports picked); etcd logs to
// lg, quiet once closing is set.
func embedConfig(c Config, lg *zap.Logger, closing *atomic.Bool) (*embed.Config, *url.URL, *url.URL, error) {
	cfg := embed.NewConfig()
	cfg.Name = "cast"
	if c.Name != "" {
		cfg.Name = c.Name
	}
	cfg.Dir = c.Dir
	cu, err := pick(c.ClientAddr)
	if err != nil {
		return nil, nil, nil, err
	}
	pu, err := pick(c.PeerAddr)
	if err != nil {
		return nil, nil, nil, err
	}
	if c.PasswordFile != "" {
		if cfg.PeerTLSInfo, err = peerTLS(c.Dir); err != nil {
			return nil, nil, nil, err
		}
		pu.Scheme = "https"
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.Name + "=" + pu.String()
	if c.InitialCluster != "" {
		cfg.InitialCluster = c.InitialCluster
	}
	cfg.QuotaBackendBytes = c.QuotaBytes
	if c.CompactionRetention > 0 {
		cfg.AutoCompactionMode = "periodic"
		cfg.AutoCompactionRetention = c.CompactionRetention.String()
	}
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(etcdLogger(lg, closing))
	cfg.Metrics = "basic"
	// The root password is 256 random bits: bcrypt's cost adds nothing
	// to it, and the minimum keeps every start and dial fast. (etcd's
	// simple auth tokens expire after 5 idle minutes; the store's
	// readiness probe uses its token every few seconds.)
	cfg.BcryptCost = 4 // bcrypt.MinCost
	return cfg, cu, pu, nil
}

// ready waits until the started member e serves; it closes e when it
// fails first, ctx ends, or a minute passes.
func ready(ctx context.Context, e *embed.Etcd) error {
	select {
	case <-e.Server.ReadyNotify():
		return nil
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("etcdembed: %w", err)
	case <-ctx.Done():
		e.Close()
		return ctx.Err()
	case <-time.After(60 * time.Second):
		e.Close()
		return fmt.Errorf("etcdembed: not ready after 60s")
	}
}

// Err reports a fatal error of the running member.
func (e *Etcd) Err() <-chan error { return e.e.Err() }

// Close stops the member.
func (e *Etcd) Close() {
	e.closing.Store(true)
	e.e.Close()
}

// pick resolves host:port to a URL, choosing a free loopback port for 0.
// (etcd needs the concrete port up front for its advertised URLs.)
func pick(addr string) (*url.URL, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("etcdembed: address %q: %w", addr, err)
	}
	if port == "0" {
		if addr, err = FreeAddr(host); err != nil {
			return nil, err
		}
	}
	return &url.URL{Scheme: "http", Host: addr}, nil
}

// Ports below Linux's default ephemeral range (32768-60999): a port picked
// here and released until etcd binds it is never handed to an outgoing
// connection meanwhile, as a port the kernel chose for a listener on port
// 0 can be (a member restarted on its old ports needs them free too).
const (
	pickLow  = 20000
	pickHigh = 32768
)

// picked are the ports FreeAddr returned in this process: two callers
// that each pick a port before either binds it must not get the same one.
var picked sync.Map

// FreeAddr returns host:port with a port that was free just now, chosen at
// random below the ephemeral range; if none is found, one the kernel picks.
func FreeAddr(host string) (string, error) {
	for range 64 {
		port := pickLow + rand.IntN(pickHigh-pickLow)
		if _, taken := picked.LoadOrStore(port, true); taken {
			// Handed out before in this process, maybe not bound yet.
			continue
		}
		addr := net.JoinHostPort(host, strconv.Itoa(port))
		if l, err := net.Listen("tcp", addr); err == nil {
			l.Close()
			return addr, nil
		}
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
