package node

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/agents"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/runner"
	"github.com/cast-dev/cast/internal/tick"
)

// probes is what running each agent's CLI once said (node --probe): the
// answer to "does its login work", where Readiness only says "a login is
// there".
type probes struct {
	// running is held by each probe: one CLI at a time, whether the probe
	// loop (node --probe) or `cast nodes --probe` asked.
	running sync.Mutex
	mu      sync.Mutex
	last    map[string]probed // by agent
	kick    chan struct{}     // probe again now (a turn failed for want of a login)
}

// probed is one agent's last probe and the file check it was made on: a
// probe answers for the login the files showed then, not for a changed one.
type probed struct {
	seen  *castv1.AgentInstall // Readiness's look when probed
	res   runner.ProbeResult
	stale bool
}

func newProbes() *probes {
	return &probes{last: map[string]probed{}, kick: make(chan struct{}, 1)}
}

// again marks every probe stale and wakes the probe loop.
func (p *probes) again() {
	p.mu.Lock()
	for k, v := range p.last {
		v.stale = true
		p.last[k] = v
	}
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// forget drops every probe's answer: READY comes from the files again.
func (p *probes) forget() {
	p.mu.Lock()
	clear(p.last)
	p.mu.Unlock()
}

// probeable says whether the runner can drive agent in's CLI.
func probeable(in *castv1.AgentInstall) bool {
	a, ok := agents.Lookup(in.Name)
	if !ok || in.Path == "" {
		return false
	}
	_, ok = a.Driver()
	return ok
}

// due says whether agent in (as Readiness sees it) is to be probed: never
// probed, its files or version changed since, its last probe failed or was
// marked stale. An agent the runner cannot drive is not probed.
func (p *probes) due(in *castv1.AgentInstall) bool {
	if !probeable(in) {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	last, ok := p.last[in.Name]
	return !ok || last.stale || !last.res.Ready || !proto.Equal(last.seen, in)
}

// apply puts the probe's answer on in when it was made on the look in
// shows; otherwise in keeps the file check until the next probe.
func (p *probes) apply(in *castv1.AgentInstall) {
	p.mu.Lock()
	last, ok := p.last[in.Name]
	p.mu.Unlock()
	if !ok || !proto.Equal(last.seen, in) {
		return
	}
	found := in.Status
	in.Probed, in.Ready = true, last.res.Ready
	switch {
	case last.res.Ready && in.Status != "" && last.seen.Ready:
		in.Status = "probed: answered (" + found + ")"
	case last.res.Ready:
		in.Status = "probed: answered"
	default:
		in.Status = "probed: " + last.res.Said
	}
}

// readiness is Readiness with each agent's last probe applied.
func (a *Daemon) readiness() []*castv1.AgentInstall {
	list := a.cfg.Readiness()
	for _, in := range list {
		a.probes.apply(in)
	}
	return list
}

// probeAgents probes the agents that are due (probes.due): at start, every
// ReadinessInterval and when a turn failed for want of a login. One CLI at
// a time, so never two probes of one agent; each bounded by ProbeTimeout.
// What changed is advertised at once.
func (a *Daemon) probeAgents(ctx context.Context) {
	// Each probe's cwd goes under one folder, emptied first: a node killed
	// mid-probe leaves nothing behind for long.
	dir := a.cfg.probeDir()
	_ = os.RemoveAll(dir)
	tick.Loop{Every: a.cfg.ReadinessInterval, First: true, Wake: a.probes.kick}.Run(ctx, func() bool {
		changed := false
		for _, in := range a.cfg.Readiness() {
			if ctx.Err() == nil && a.probes.due(in) && a.probeAgent(ctx, in, dir) {
				changed = true
			}
		}
		if changed {
			a.advertiseNow()
		}
		return true
	})
}

// probeNow probes every agent whose CLI the runner drives, due or not
// (`cast nodes --probe` asked), advertises what changed and returns what
// `cast nodes` then shows of the node's agents.
func (a *Daemon) probeNow(ctx context.Context) []*castv1.AgentInstall {
	dir := a.cfg.probeDir()
	changed := false
	for _, in := range a.cfg.Readiness() {
		if ctx.Err() == nil && probeable(in) && a.probeAgent(ctx, in, dir) {
			changed = true
		}
	}
	if changed {
		a.advertiseNow()
	}
	return a.readiness()
}

// probeDir is the folder each probe's cwd goes under: the node's own, in
// which adoption never takes a session for the user's (adoptCast.Scratch).
func (c Config) probeDir() string { return filepath.Join(c.DataDir, "probe") }

// probeAgent runs agent in's CLI once as its turns run (its default
// setup) and records the answer; true when what `cast nodes` shows of it
// changed.
func (a *Daemon) probeAgent(ctx context.Context, in *castv1.AgentInstall, dir string) bool {
	s := a.cfg.agentSetup(in.Name)
	t := a.cfg.newTurn(in.Name, s, s.Env)
	a.probes.running.Lock()
	start := time.Now()
	done := a.clis.running(in.Name) // its scratch session is no one's to adopt
	res, err := a.runner.Probe(ctx, t, dir, a.cfg.ProbeTimeout)
	done()
	a.probes.running.Unlock()
	if ctx.Err() != nil {
		return false // the node is stopping: no answer
	}
	lg := a.lg.With(zap.String("agent", in.Name), zap.Bool("ready", res.Ready), zap.String("said", res.Said), zap.String("native_id", res.NativeID), zap.Duration("took", time.Since(start)))
	if err != nil {
		lg.Warn("agent probe left its session behind", zap.Error(err))
	} else {
		lg.Info("agent probed")
	}
	a.probes.mu.Lock()
	defer a.probes.mu.Unlock()
	last, had := a.probes.last[in.Name]
	a.probes.last[in.Name] = probed{seen: in, res: res}
	return !had || last.res.Ready != res.Ready || last.res.Said != res.Said || !proto.Equal(last.seen, in)
}
