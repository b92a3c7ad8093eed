package controlplane

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"

	"github.com/cast-dev/cast/internal/authn"
	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/brief"
	"github.com/cast-dev/cast/internal/capability"
	"github.com/cast-dev/cast/internal/catrust"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/etcdembed"
	"github.com/cast-dev/cast/internal/fanout"
	"github.com/cast-dev/cast/internal/fleet"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/metrics"
	"github.com/cast-dev/cast/internal/migrate"
	"github.com/cast-dev/cast/internal/moves"
	"github.com/cast-dev/cast/internal/oidcauth"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/turnstate"
	"github.com/cast-dev/cast/internal/web"
)

// Server is one running control plane replica.
type Server struct {
	cfg   Config
	lg    *zap.Logger
	store *store.Store
	hub   *hub
	// dispatch turns store changes into node commands.
	dispatch *dispatcher
	// watches fans the replica's one session feed out to WatchSession
	// streams and RequestPermission waits.
	watches *fanout.Hub
	m       *metrics.ControlPlane
	// migrations runs `cast migrate`; it lives until stopCx ends.
	migrations *migrate.Manager
	// fleet runs fleet accounts and their auto-switch.
	fleet *fleet.Manager
	turns *turnstate.Reporter // ReportTurn's core: the state, then fleet and moves hear it
	// vault is token custody's record (nil without --token-custody).
	vault *store.Vault
	// briefer writes handoff briefs; a nil client makes every brief a fallback.
	briefer *brief.Client
	reg     *prometheus.Registry
	// policy is the authorization rule of every RPC (policy.go).
	policy authz.Policy
	// creators are the creators of sessions users were let use (policy.go).
	creators creatorCache
	limits   *authz.Limiter       // per-user and per-node rates and streams
	calls    *openCalls           // calls in flight by credential, ended on revocation (revocation.go)
	authn    *authn.Authenticator // names callers; its token cache is kept by the same watch
	// caCalls: calls made with a client certificate, by its CA's pin,
	// ended when the CA is no longer trusted (revocation.go).
	caCalls *openCalls
	// webCalls: calls made through the web app, by their browser
	// session's hash, ended at its sign-out (watchSignOuts).
	webCalls *openCalls
	refusals *refusalLog        // refused requests' audit lines, per peer (refusallog.go)
	oidc     *oidcauth.Verifier // ID tokens as user credentials (nil: off)
	// tls is the listener's TLS config (nil: plaintext); CAPin and caFile
	// say how clients trust it (tls.go).
	tls *tls.Config
	// trust is the CAs that sign and verify certificates (nil:
	// plaintext), reloaded from the store (carotation.go).
	trust  *catrust.Manager
	caFile string
	// bundleMD is the current trust set's reply header (caservice.go).
	bundleMD atomic.Pointer[bundleMD]

	etcd    *etcdembed.Etcd
	grpc    *grpc.Server
	health  *health.Server
	lis     net.Listener
	httpSrv *http.Server
	httpLis net.Listener
	web     *web.Server // the web timeline (nil: not served)

	stop     context.CancelFunc // ends streams and background loops
	stopCx   context.Context
	wg       sync.WaitGroup
	stopOnce sync.Once
}

// Start brings up etcd (embedded unless endpoints are given), the store,
// the gRPC API and the metrics endpoint. Stop undoes it.
func Start(ctx context.Context, cfg Config, lg *zap.Logger) (_ *Server, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.ReplicaID == "" {
		host, _ := os.Hostname()
		cfg.ReplicaID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if cfg.Auth.AdminTokenFile == "" && cfg.DataDir != "" {
		cfg.Auth.AdminTokenFile = filepath.Join(cfg.DataDir, AdminTokenFileName)
	}
	s := &Server{cfg: cfg, lg: lg.Named("controlplane"), reg: prometheus.NewRegistry()}
	s.stopCx, s.stop = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	endpoints, err := s.openStore(ctx, lg)
	if err != nil {
		return nil, err
	}
	if err := s.newCores(); err != nil {
		return nil, err
	}
	if err := s.newAuth(ctx); err != nil {
		return nil, err
	}
	if err := s.serve(ctx); err != nil {
		return nil, err
	}
	s.startLoops()
	s.lg.Info("control plane serving", zap.String("grpc", s.Addr()), zap.String("metrics", s.MetricsAddr()), zap.Bool("metrics_tls", s.tls != nil),
		zap.Strings("etcd", endpoints), zap.Bool("embedded_etcd", s.etcd != nil))
	return s, nil
}

// openStore starts the embedded etcd unless endpoints are configured,
// registers the process's metrics and opens the store and the object
// store over it. It returns the etcd endpoints in use.
func (s *Server) openStore(ctx context.Context, lg *zap.Logger) (_ []string, err error) {
	cfg := s.cfg
	endpoints, access := cfg.EtcdEndpoints, cfg.Etcd
	if len(endpoints) == 0 {
		// Loopback only, with auth: another local user or process
		// reading etcd would read owner tokens and sealed data.
		s.etcd, err = etcdembed.Start(ctx, etcdembed.Config{
			Dir: cfg.DataDir, ClientAddr: cfg.EtcdClient, PeerAddr: "127.0.0.1:0",
			QuotaBytes: cfg.Store.QuotaBytes, CompactionRetention: time.Hour,
			PasswordFile: filepath.Join(cfg.DataDir, etcdembed.PasswordFileName),
		}, lg)
		if err != nil {
			return nil, err
		}
		endpoints = []string{s.etcd.ClientURL}
		access = store.Access{User: s.etcd.User, Password: s.etcd.Password}
	}
	s.m = newControlPlaneMetrics(s)
	metrics.SetBuildInfo(s.reg, CapabilityVersion)
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if s.store, err = store.Open(ctx, endpoints, access, cfg.Store, metrics.NewStore(s.reg), lg); err != nil {
		return nil, err
	}
	return endpoints, s.useObjects(ctx)
}

// newCores makes the cores over the store: the watch hubs, briefs,
// migrations, the policy and the limits.
func (s *Server) newCores() (err error) {
	cfg := s.cfg
	s.hub = newHub(s.lg, s.m)
	s.watches = fanout.New(s.store, cfg.Watch, s.lg)
	metrics.NewWatchFanout(s.reg,
		func() int64 { return s.watches.Stats().FellBehind },
		func() int64 { return s.watches.Stats().Feeds })
	s.briefer = brief.New(cfg.Brief)
	mc := cfg.Migrate
	mc.SourceGrace = cfg.LeaseTTL // nodes stop their agents by themselves within it
	if s.migrations, err = migrate.New(s.stopCx, s.store, mc, metrics.NewMigration(s.reg), s.lg); err != nil {
		return err
	}
	s.migrations.SetDiverter(migrationDiverter{s})
	s.policy = s.newPolicy()
	s.limits = authz.NewLimiter(cfg.Limits, cfg.NodeLimits, cfg.PeerLimits)
	s.calls, s.caCalls, s.webCalls = newOpenCalls(errRevoked), newOpenCalls(errCARetired), newOpenCalls(errSignedOut)
	s.refusals = newRefusalLog(cfg.RefusalLog)
	return nil
}

// newAuth makes who-is-calling and what they hold: credentials (tokens,
// OIDC), the first admin token, the secrets key, the vault, the fleet
// and the turns' observers.
func (s *Server) newAuth(ctx context.Context) (err error) {
	if s.cfg.Auth.OIDC.Enabled() {
		s.oidc = oidcauth.New(s.cfg.Auth.OIDC, s.lg)
	}
	var idTokens authn.Verifier // an interface holding a nil *Verifier would not be nil
	if s.oidc != nil {
		idTokens = s.oidc
	}
	// Each credential read waits as the web app's own sign-in store calls do.
	s.authn = authn.New(tokenRecords{s.store}, idTokens, s.calls.wasRevoked, storeWait)
	if err := s.bootstrap(ctx); err != nil {
		return fmt.Errorf("first admin token: %w", err)
	}
	if err := s.makeSecretsKey(ctx); err != nil {
		return err
	}
	// The vault first: the fleet puts each login it adds there.
	if err := s.newVault(); err != nil {
		return err
	}
	if s.fleet, err = s.newFleet(); err != nil {
		return err
	}
	s.turns = turnstate.New(s.store, s.lg, turnstate.Named{Name: "fleet", Observer: s.fleet},
		turnstate.Named{Name: "worker's parent", Observer: moves.Parents{St: s.store}})
	return nil
}

// serve loads TLS and starts the gRPC, metrics and web listeners.
func (s *Server) serve(ctx context.Context) (err error) {
	if s.tls, err = s.loadTLS(ctx); err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	if s.tls == nil {
		s.lg.Warn("serving plaintext gRPC and HTTP (--insecure): tokens, node credentials and fleet credentials cross the network in clear, and /metrics, /healthz and /readyz are plain HTTP; use --tls off loopback")
	}
	if err := s.startGRPC(); err != nil {
		return err
	}
	if err := s.startHTTP(); err != nil {
		return err
	}
	return s.startWeb()
}

// startLoops starts the background loops, each ended by Stop.
func (s *Server) startLoops() {
	s.goLoop(s.store.Run)
	s.goLoop(s.watches.Run)
	s.goLoop(s.watchRevocations)
	if s.web != nil {
		s.goLoop(s.watchSignOuts)
	}
	s.goLoop(func(ctx context.Context) { s.refusals.run(ctx, s.lg) })
	s.dispatch = &dispatcher{s: s, lg: s.lg.Named("dispatch")}
	s.goLoop(s.dispatch.run)
	s.goLoop(s.watchHealth)
	if s.oidc != nil {
		// Early, so a wrong --oidc-issuer shows in the log at start.
		s.goLoop(func(ctx context.Context) { _ = s.oidc.Discover(ctx) })
	}
	s.goLoop(s.countSessionsEvery(s.cfg.SessionCount))
	s.startRetention()
	s.goLoop(s.migrations.Run)
	s.goLoop(s.fleet.Run)
	s.goLoop(s.auditCustody)
	s.goLoop(newLiveness(s).run)
	if s.cfg.Publish != nil {
		s.goLoop(func(ctx context.Context) { s.cfg.Publish.Run(ctx, s) })
	}
}

func (s *Server) startGRPC() error {
	srvMetrics := grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram())
	s.reg.MustRegister(srvMetrics)
	panics := recovery.WithRecoveryHandler(s.handlerPanic)
	reqs := newRequestCodec()
	opts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(reqs),
		// A method it does not have: UNIMPLEMENTED with its reason (grpc-go
		// gives none). The stream interceptors run first (authorize says
		// the same).
		grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
			m, _ := grpc.MethodFromServerStream(ss)
			return toStatus(s.lg, errs.UnknownMethod(m))
		}),
		grpc.MaxRecvMsgSize(s.cfg.MaxRecvBytes),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Minute, Timeout: 20 * time.Second}),
		grpc.ChainUnaryInterceptor(recovery.UnaryServerInterceptor(panics), srvMetrics.UnaryServerInterceptor(), reqs.unary, s.unaryAuth),
		grpc.ChainStreamInterceptor(recovery.StreamServerInterceptor(panics), srvMetrics.StreamServerInterceptor(), reqs.stream, s.streamAuth),
	}
	if s.tls != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.tls)))
	}
	s.grpc = grpc.NewServer(opts...)
	castv1.RegisterSessionServiceServer(s.grpc, &sessionService{s: s})
	castv1.RegisterNodeServiceServer(s.grpc, &nodeService{s: s})
	castv1.RegisterMigrationServiceServer(s.grpc, &migrationService{s: s})
	castv1.RegisterAccountServiceServer(s.grpc, &accountService{s: s})
	castv1.RegisterAuthServiceServer(s.grpc, &authService{s: s})
	castv1.RegisterVersionServiceServer(s.grpc, &versionService{s: s})
	castv1.RegisterAgentServiceServer(s.grpc, &agentService{s: s, m: metrics.NewCanary(s.reg, capability.Agents(), capability.All)})
	s.health = health.NewServer()
	healthpb.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc) // grpcurl list / describe
	srvMetrics.InitializeMetrics(s.grpc)
	lis, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", s.cfg.Listen, err)
	}
	s.lis = lis
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.grpc.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			s.lg.Error("grpc serve failed", zap.Error(err))
		}
	}()
	return nil
}

func (s *Server) startHTTP() error {
	if s.cfg.MetricsListen == "" {
		return nil
	}
	mux := http.NewServeMux()
	// Embedded etcd registers its own metrics in the default registry:
	// /metrics carries those that pass `promtool check metrics`, and
	// /metrics/etcd all of them.
	mux.Handle("/metrics", promhttp.HandlerFor(prometheus.Gatherers{s.reg, etcdGatherer{lint: true}}, promhttp.HandlerOpts{}))
	mux.Handle("/metrics/etcd", promhttp.HandlerFor(etcdGatherer{}, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := s.store.Ready(ctx); err != nil {
			http.Error(w, "store not ready", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	if s.cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index) // the named profiles: heap, goroutine, allocs...
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	lis, err := net.Listen("tcp", s.cfg.MetricsListen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", s.cfg.MetricsListen, err)
	}
	s.httpLis = lis
	// HTTPS with the gRPC listener's certificate (same CA, renewed alike);
	// plain HTTP only where gRPC is plaintext (--insecure).
	var tlsCfg *tls.Config
	if s.tls != nil {
		tlsCfg = pki.ServeConfig(s.tls.GetCertificate)
	}
	s.httpSrv = metrics.HTTPServer(mux, tlsCfg)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := metrics.ServeHTTP(s.httpSrv, lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.lg.Error("metrics serve failed", zap.Error(err))
		}
	}()
	return nil
}

// watchHealth keeps the gRPC health status in step with the store.
func (s *Server) watchHealth(ctx context.Context) {
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st := healthpb.HealthCheckResponse_SERVING
		if err := s.store.Ready(cctx); err != nil {
			st = healthpb.HealthCheckResponse_NOT_SERVING
		}
		cancel()
		s.setHealth(st)
		s.countNodes(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
	}
}

// setHealth sets the overall status ("") and every served service's: all
// of them stand or fall with the store.
func (s *Server) setHealth(st healthpb.HealthCheckResponse_ServingStatus) {
	s.health.SetServingStatus("", st)
	for name := range s.grpc.GetServiceInfo() {
		s.health.SetServingStatus(name, st)
	}
}

// countNodes sets the fleet gauges from the store, so every replica
// reports the same numbers whichever holds the streams.
func (s *Server) countNodes(ctx context.Context) {
	nodes, err := s.store.ListNodes(ctx)
	if err != nil {
		return
	}
	n := 0
	for _, nd := range nodes {
		if nd.Connected {
			n++
		}
	}
	s.m.NodesConnected.Set(float64(n))
	s.m.NodesDown.Set(float64(len(nodes) - n))
}

func (s *Server) goLoop(fn func(context.Context)) {
	s.wg.Add(1)
	go func() { defer s.wg.Done(); fn(s.stopCx) }()
}

// streamContext ends a long-lived stream when the server stops, so
// GracefulStop does not wait on node streams and watches forever.
func (s *Server) streamContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	stop := context.AfterFunc(s.stopCx, cancel)
	return ctx, func() { stop(); cancel() }
}

// Addr is the gRPC listen address.
func (s *Server) Addr() string {
	if s.lis == nil {
		return ""
	}
	return s.lis.Addr().String()
}

// MetricsAddr is the HTTP listen address, or "".
func (s *Server) MetricsAddr() string {
	if s.httpLis == nil {
		return ""
	}
	return s.httpLis.Addr().String()
}

// Stop shuts down in order: streams, gRPC (gracefully, then forcibly after
// the deadline), HTTP, background loops, the store, then etcd.
func (s *Server) Stop() { s.stopOnce.Do(s.shutdown) }

func (s *Server) shutdown() {
	s.stop()
	if s.health != nil {
		s.health.Shutdown()
	}
	if s.web != nil {
		// Its calls are the gRPC server's (ServeHTTP): closed first, as
		// GracefulStop would wait on their watches.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		s.web.Stop(ctx)
		cancel()
	}
	if s.grpc != nil {
		done := make(chan struct{})
		go func() { s.grpc.GracefulStop(); close(done) }()
		select {
		case <-done:
		case <-time.After(s.cfg.Shutdown):
			s.lg.Warn("graceful stop timed out; stopping")
			s.grpc.Stop()
		}
	}
	if s.httpSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = s.httpSrv.Shutdown(ctx)
		cancel()
	}
	s.wg.Wait()
	if s.store != nil {
		_ = s.store.Close()
	}
	if s.etcd != nil {
		s.etcd.Close()
	}
}

// Run starts a replica and serves until ctx ends or embedded etcd fails.
func Run(ctx context.Context, cfg Config, lg *zap.Logger) error {
	s, err := Start(ctx, cfg, lg)
	if err != nil {
		return err
	}
	defer s.Stop()
	// systemd's Type=notify (deploy/systemd): ready once it serves.
	_, _ = daemon.SdNotify(false, daemon.SdNotifyReady)
	defer daemon.SdNotify(false, daemon.SdNotifyStopping) //nolint:errcheck
	var etcdErr <-chan error
	if s.etcd != nil {
		etcdErr = s.etcd.Err()
	}
	select {
	case <-ctx.Done():
		lg.Info("shutting down")
		return nil
	case err := <-etcdErr:
		return fmt.Errorf("embedded etcd failed: %w", err)
	}
}

// handlerPanic answers a call whose handler panicked: INTERNAL with its
// reason, as every other refusal has one; what panicked stays in the log.
func (s *Server) handlerPanic(p any) error {
	s.lg.Error("handler panic", zap.Any("panic", p))
	return withInfo(codes.Internal, "internal error", errs.ReasonInternal, nil)
}
