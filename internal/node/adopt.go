package node

import (
	"context"
	"path/filepath"
	"slices"
	"sync"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/adopt"
	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/exportlog"
	"github.com/cast-dev/cast/internal/fsutil"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/runner"
	"github.com/cast-dev/cast/internal/tick"
	"github.com/cast-dev/cast/internal/wire"
)

// castCLIs is what the node knows of the CLIs it runs itself, so adoption
// never takes their files for sessions the user ran: how many run now per
// agent (a fresh turn's file exists before its native id is recorded),
// and the files its turns used since the node started, with the cast
// session each native session is (the state records it only when the
// turn has completed, after its CLI counts as running no more: a
// subagent's run found in between is still its session's worker).
type castCLIs struct {
	mu       sync.Mutex
	busy     map[string]int
	files    map[string]bool
	sessions map[string]string // agent#native id -> cast session
}

// running marks a CLI of agent as running until the returned func.
func (c *castCLIs) running(agent string) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.busy == nil {
		c.busy = map[string]int{}
	}
	c.busy[agent]++
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.busy[agent]--
	}
}

// used notes the native session a turn of session's ran in: its file,
// and its id (a store agent's sessions share one file).
func (c *castCLIs) used(agent, path, id, session string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.files == nil {
		c.files, c.sessions = map[string]bool{}, map[string]string{}
	}
	if path != "" {
		c.files[path] = true
	}
	if id != "" {
		c.files[agent+"#"+id] = true
		c.sessions[agent+"#"+id] = session
	}
}

// sessionOf is the cast session whose turn ran native session id of
// agent ("" when none did since the node started).
func (c *castCLIs) sessionOf(agent, id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if id == "" {
		return ""
	}
	return c.sessions[agent+"#"+id]
}

// adoptSources are the agents' own folders adoption watches: every agent
// whose driver lists its sessions (or those --adopt-agents names), as the
// node runs it, with its CLI where listing needs it (a store agent).
func (a *Daemon) adoptSources() []adopt.Source {
	c := a.cfg
	var out []adopt.Source
	for _, name := range agents.Listers() {
		if len(c.AdoptAgents) > 0 && !slices.Contains(c.AdoptAgents, name) {
			continue
		}
		s := c.agentSetup(name)
		t := c.newTurn(name, s, s.Env)
		src := adopt.Source{Agent: name, Home: t.AgentDir()}
		// An agent whose sessions are rows in a store its CLI reads: the
		// listing runs that CLI.
		if _, store := agents.DriverAs[agents.StoreLister](name); store {
			bin, env, err := a.runner.CLI(t)
			if err != nil {
				a.lg.Info("adoption skips an agent whose CLI is not here", zap.String("agent", name), zap.Error(err))
				continue
			}
			src.Bin, src.Env = bin, env
		}
		out = append(out, src)
	}
	return out
}

// adoptLoop keeps the native sessions under the agents' folders as cast
// sessions (internal/adopt) until ctx ends.
func (a *Daemon) adoptLoop(ctx context.Context) {
	f, err := adopt.New(a.adoptSources(), filepath.Join(a.cfg.DataDir, "adopt"), adoptSink{a}, adoptCast{a}, a.lg)
	if err != nil {
		a.lg.Error("adoption of native sessions is off: its bookkeeping is unreadable", zap.Error(err))
		return
	}
	tick.Loop{Every: a.cfg.AdoptInterval, First: true}.Run(ctx, func() bool {
		_, _ = f.Scan(ctx) // each failure is logged; the next scan tries again
		return true
	})
}

// adoptSink sends adopted batches to the control plane.
type adoptSink struct{ a *Daemon }

func (s adoptSink) Adopt(ctx context.Context, b adopt.Batch) (string, error) {
	cwd := b.Cwd
	if cwd == "" && b.SessionID == "" {
		cwd = s.a.cfg.userHome() // the format does not say: the user's home
	}
	msgs := make([]*castv1.Message, len(b.Messages))
	for i, m := range b.Messages {
		if m.Agent == "" {
			m.Agent = b.Agent
		}
		msgs[i] = wire.ToProto(m)
	}
	resp, err := s.a.cli.Nodes.AdoptSession(ctx, &castv1.AdoptSessionRequest{
		Node: s.a.cfg.Name, SessionId: b.SessionID, Cwd: cwd, Title: b.Title, HistoryMessages: b.History, Messages: msgs,
		ParentNativeId: b.ParentNativeID, ParentSessionId: b.ParentSessionID, ParentCallId: b.ParentCallID,
		Origin: &castv1.SessionOrigin{Node: s.a.cfg.Name, Agent: b.Agent, NativeId: b.NativeID, Path: b.Path},
	})
	if err != nil {
		s.a.learnMessageLimit(err)
		size := 0
		for _, m := range msgs {
			size += proto.Size(m)
		}
		s.a.learnBatchLimit(err, size)
		return "", err
	}
	return resp.SessionId, nil
}

func (s adoptSink) MaxMessageBytes() int { return s.a.maxMessageBytes() }

// MaxBatchBytes is 0 (adoption's own bound) until a control plane refused
// a request too large.
func (s adoptSink) MaxBatchBytes() int { return int(s.a.batchLimit.Load()) }

// adoptCast tells adoption which native files are cast's own.
type adoptCast struct{ a *Daemon }

// Runs counts the native sessions of sessions the node released as
// cast's too (state.Released), never adopting them: their history is the
// released session's, kept already, and adopting the file left behind
// listed a copy of it as a new session. The cost: a user resuming such a
// file by hand later is not followed (the lesser harm). SessionOf does
// not name them, as the node no longer runs those sessions.
func (c adoptCast) Runs(agent, path, nativeID string) bool {
	cl := &c.a.clis
	cl.mu.Lock()
	mine := (path != "" && cl.files[path]) || (nativeID != "" && cl.files[agent+"#"+nativeID])
	cl.mu.Unlock()
	return mine || c.a.st.holdsNative(agent, path, nativeID)
}

func (c adoptCast) SessionOf(agent, nativeID string) string {
	if id := c.a.clis.sessionOf(agent, nativeID); id != "" {
		return id
	}
	return c.a.st.sessionOfNative(agent, nativeID)
}

// Scratch: the probe's folder (probe.go), where every probe's CLI runs.
// A probe removes the session its CLI made, but one whose removal failed,
// or of a node killed mid-probe, stays in the agent's folder.
func (c adoptCast) Scratch(cwd string) bool {
	in, err := fsutil.Within(cwd, c.a.cfg.probeDir())
	return err == nil && in
}

func (c adoptCast) Busy(agent string) bool {
	cl := &c.a.clis
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.busy[agent] > 0
}

// Wrote reads the user's export log (where `cast export` and `cast
// restore` note the files they write) each time: the CLI writes it.
func (c adoptCast) Wrote(path string) (exportlog.Record, bool) {
	l, err := c.exportLog()
	if err != nil {
		return exportlog.Record{}, false
	}
	return l.ByPath(path)
}

// Exported reads the export log as Wrote does, for a stored session.
func (c adoptCast) Exported(agent, nativeID string) (exportlog.Record, bool) {
	l, err := c.exportLog()
	if err != nil {
		return exportlog.Record{}, false
	}
	return l.ByNative(agent, nativeID)
}

// exportLog is the user's export log, read once no write is half done.
func (c adoptCast) exportLog() (*exportlog.Log, error) {
	env := c.a.cfg.UserEnv
	return exportlog.Settled(client.BesideConfig(func(k string) string { return runner.EnvValue(env, k) }, exportlog.FileName))
}
