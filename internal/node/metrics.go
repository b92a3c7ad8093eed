package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/metrics"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/runner"
)

// turnSucceeded is the outcome of a turn the agent finished; any other is
// the runner's reason, with underscores ("rate_limited").
const turnSucceeded = "succeeded"

// turnFailed is the duration histogram's outcome of every failed turn: one
// series per reason there would multiply the buckets for little gain.
const turnFailed = "failed"

var turnReasons = []string{runner.ReasonBinaryNotFound, runner.ReasonNotLoggedIn, runner.ReasonRefused,
	runner.ReasonRateLimited, runner.ReasonInterrupted, runner.ReasonNoSession, runner.ReasonUnsupported, runner.ReasonKilled, runner.ReasonFailed}

// turnOutcome is the outcome label of a turn that ended with err.
func turnOutcome(err error) string {
	if err == nil {
		return turnSucceeded
	}
	var rerr *runner.Error
	if errors.As(err, &rerr) {
		for _, r := range turnReasons {
			if rerr.Reason == r {
				return strings.ReplaceAll(r, " ", "_")
			}
		}
	}
	return strings.ReplaceAll(runner.ReasonFailed, " ", "_")
}

// newNodeMetrics registers the node's metrics on reg, every agent and
// outcome exported at 0 so a rate or alert sees the first turn.
func newNodeMetrics(reg *prometheus.Registry) *metrics.Node {
	m := metrics.NewNode(reg)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	outcomes := []string{turnSucceeded}
	for _, r := range turnReasons {
		outcomes = append(outcomes, strings.ReplaceAll(r, " ", "_"))
	}
	metrics.Preinit(m.Turns, agents.Names(), outcomes)
	metrics.Preinit(m.TurnSeconds, agents.Names(), []string{turnSucceeded, turnFailed})
	metrics.Preinit(m.SyncLagSeconds, agents.Names())
	metrics.Preinit(m.Commands, commandKinds())
	return m
}

// turnStarted counts a running turn; the returned func records its end.
func (a *Daemon) turnStarted(agent string) func(error) {
	start := time.Now()
	a.m.Running.Inc()
	return func(err error) {
		a.m.Running.Dec()
		a.m.Turns.WithLabelValues(agent, turnOutcome(err)).Inc()
		ended := turnSucceeded
		if err != nil {
			ended = turnFailed
		}
		a.m.TurnSeconds.WithLabelValues(agent, ended).Observe(time.Since(start).Seconds())
	}
}

// ready reports whether the node holds a live stream to the control plane.
func (a *Daemon) ready() bool {
	_, cut := a.cutOff()
	return a.lastContact.Load() != 0 && !cut
}

// serveMetrics serves /metrics, /healthz (the process is up) and /readyz
// (connected to the control plane) on cfg.MetricsListen until ctx ends:
// HTTPS with the node's own certificate (from its join, renewed with it;
// it names pki.NodeMetricsName, which scrapers verify), or plain HTTP
// without TLS to the control plane (--insecure, checked by Validate).
// Before its first join a node has no certificate, and handshakes fail.
func (a *Daemon) serveMetrics(ctx context.Context, reg *prometheus.Registry) (stop func(), err error) {
	if a.cfg.MetricsListen == "" {
		return func() {}, nil
	}
	lis, err := net.Listen("tcp", a.cfg.MetricsListen)
	if err != nil {
		return nil, fmt.Errorf("--metrics-listen %s: %w", a.cfg.MetricsListen, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !a.ready() {
			http.Error(w, "not connected to the control plane", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	var tlsCfg *tls.Config
	if a.id != nil {
		tlsCfg = pki.ServeConfig(a.metricsCert)
	} else {
		a.lg.Warn("serving plain HTTP metrics (--insecure without --ca-pin): anyone on the network can read and alter what scrapers see")
	}
	srv := metrics.HTTPServer(mux, tlsCfg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := metrics.ServeHTTP(srv, lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.lg.Error("metrics serve failed", zap.Error(err))
		}
	}()
	a.lg.Info("node metrics serving", zap.String("addr", lis.Addr().String()), zap.Bool("tls", tlsCfg != nil))
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		_ = srv.Shutdown(sctx)
		cancel()
		<-done
	}, nil
}

// errNoMetricsCert fails a metrics handshake before the node's first join.
var errNoMetricsCert = errors.New("this node has no certificate yet: its metrics serve TLS once it has joined")

// metricsCert is the metrics listener's certificate: the node's current
// one, so a renewal applies at the next handshake.
func (a *Daemon) metricsCert(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := a.id.Cert(); c != nil {
		return c, nil
	}
	return nil, errNoMetricsCert
}
