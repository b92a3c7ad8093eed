package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/placement"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/turnstate"
	"github.com/cast-dev/cast/internal/validate"
)

type nodeService struct {
	castv1.UnimplementedNodeServiceServer
	s *Server
}

func (h *nodeService) ListNodes(ctx context.Context, req *castv1.ListNodesRequest) (*castv1.ListNodesResponse, error) {
	f, err := parseFilter(req.Filter, nodeFields...)
	if err != nil {
		return nil, err
	}
	page, err := pager(req.PageSize, req.PageToken, "nodes:"+scope(req.Filter), func(n *castv1.Node) string { return n.Name })
	if err != nil {
		return nil, err
	}
	nodes, err := h.s.store.ListNodes(ctx)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	nodes = slices.DeleteFunc(nodes, func(n *castv1.Node) bool {
		return !f.Match(func(field string) []string { return nodeField(n, field) })
	})
	nodes, next, err := page(nodes)
	if err != nil {
		return nil, err
	}
	return &castv1.ListNodesResponse{Nodes: nodes, NextPageToken: next}, nil
}

func (h *nodeService) DeleteNode(ctx context.Context, req *castv1.DeleteNodeRequest) (*castv1.DeleteNodeResponse, error) {
	if err := refuse(validate.Need(validate.Name, "name", req.Name)); err != nil {
		return nil, err
	}
	n, err := h.s.store.DeleteNode(ctx, req.Name, req.Force)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	// A forgotten node's credential goes too: it must join again.
	had, err := h.s.revokeNode(ctx, req.Name)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	h.s.lg.Info("node forgotten", zap.String("node", req.Name), zap.Int("sessions_left", n), zap.Bool("credential_revoked", had))
	return &castv1.DeleteNodeResponse{Sessions: int32(n)}, nil
}

func (h *nodeService) AppendOwnerMessages(ctx context.Context, req *castv1.AppendOwnerMessagesRequest) (*castv1.AppendOwnerMessagesResponse, error) {
	if err := validSessionID(req.SessionId, validate.Need(validate.Name, "node", req.Node)); err != nil {
		return nil, err
	}
	if req.OwnerToken <= 0 {
		return nil, invalid("owner_token is required for owner-side writes")
	}
	out, err := h.s.appendBatch(ctx, req.SessionId, req.Messages, fence.Guard{Node: req.Node, Token: req.OwnerToken})
	if err != nil {
		return nil, err
	}
	return &castv1.AppendOwnerMessagesResponse{Messages: out}, nil
}

func (h *nodeService) ReportTurn(ctx context.Context, req *castv1.ReportTurnRequest) (*castv1.ReportTurnResponse, error) {
	if err := validSessionID(req.SessionId); err != nil {
		return nil, err
	}
	if !ids.ValidName(req.Node) || req.OwnerToken <= 0 {
		return nil, invalid("node and owner_token are required for owner-side writes")
	}
	if err := refuse(
		validate.Enum("state", int32(req.State), castv1.SessionState_name, false),
		validate.Check(validate.Reason, "state_reason", req.StateReason),
		validate.Check(validate.Name, "fleet_account", req.FleetAccount),
		validate.Check(validate.Cwd, "cwd", req.Cwd),
		validate.Check(validate.Name, "agent", req.Agent),
	); err != nil {
		return nil, err
	}
	if err := validUsage(req.Usage); err != nil {
		return nil, err
	}
	if req.Interrupted && req.State != castv1.SessionState_SESSION_STATE_IDLE {
		// An interrupted turn ends idle; a failure is shown as one.
		return nil, refuse(errs.Invalid("interrupted is for a turn that ended idle, not %s", req.State).With("field", "interrupted"))
	}
	if req.Abandoned && (req.State != castv1.SessionState_SESSION_STATE_IDLE || req.Interrupted) {
		// An abandoned turn ends idle, its prompt to run again: no one
		// stopped it, and it did not fail.
		return nil, refuse(errs.Invalid("abandoned is for a turn that ended idle and was not interrupted, not %s", req.State).With("field", "abandoned"))
	}
	if err := h.s.validReportSeqs(ctx, req.SessionId, req.DeliveredSeq, req.HeldSeq); err != nil {
		return nil, err
	}
	sess, err := h.s.turns.Report(ctx, turnstate.Report{
		SessionID: req.SessionId,
		Guard:     fence.Guard{Node: req.Node, Token: req.OwnerToken},
		State: fence.TurnState{State: req.State, Reason: req.StateReason, ExitCode: req.ExitCode,
			DeliveredSeq: req.DeliveredSeq, Cwd: req.Cwd, Interrupted: req.Interrupted, Abandoned: req.Abandoned, HeldSeq: req.HeldSeq, Agent: req.Agent},
		FleetAccount: req.FleetAccount,
		Usage:        req.Usage,
	})
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	return &castv1.ReportTurnResponse{Session: sess}, nil
}

// Connect serves a node's stream: hello, then heartbeats keep its lease
// while commands flow down. The node is down once the stream ends (lease
// revoked) or its heartbeats stop for longer than the lease TTL.
func (h *nodeService) Connect(stream castv1.NodeService_ConnectServer) error {
	ctx, cancel := h.s.streamContext(stream.Context())
	defer cancel()
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	hello := first.GetHello()
	if hello == nil || hello.Node == nil {
		return invalid("the first frame on a Connect stream must be hello")
	}
	node := hello.Node
	if err := validNode(node); err != nil {
		return err
	}
	if len(hello.OwnedSessions) > maxHelloSessions {
		return invalid("hello lists %d sessions; at most %d", len(hello.OwnedSessions), maxHelloSessions)
	}
	lg := h.s.lg.With(zap.String("node", node.Name))
	since := time.Now()
	var l fence.Lease
	err = storeBound(ctx, "registering the node", func(ctx context.Context) (err error) {
		l, err = h.s.store.RegisterNode(ctx, node, h.s.cfg.ReplicaID, h.s.cfg.LeaseTTL)
		return err
	})
	if err != nil {
		return toStatus(lg, err)
	}
	var lease atomic.Int64 // replaced by the receive loop when it re-registers
	lease.Store(int64(l))
	conn := newNodeConn(node.Name, cancel, h.s.cfg.NodeQueue)
	h.s.hub.add(conn)
	defer func() {
		h.s.hub.remove(conn)
		// Revoking marks the node down at once; if it already reconnected
		// elsewhere its key is bound to the new lease and survives.
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer rcancel()
		if err := h.s.store.UnregisterNode(rctx, fence.Lease(lease.Load())); err != nil {
			lg.Warn("revoke node lease failed", zap.Error(err))
		}
		lg.Info("node disconnected")
	}()
	lg.Info("node connected", zap.Strings("labels", node.Labels), zap.Int("agents", len(node.Agents)))
	conn.out <- &castv1.ConnectResponse{Frame: &castv1.ConnectResponse_Welcome{Welcome: &castv1.Welcome{
		LeaseTtlSeconds: int64(h.s.cfg.LeaseTTL / time.Second), HeartbeatIntervalMillis: h.s.cfg.Heartbeat.Milliseconds(),
	}}}
	h.s.fleet.NodeHello(ctx, node.Name)
	if h.s.cfg.NodeHello != nil {
		h.s.cfg.NodeHello(node)
	}

	sendErr := make(chan error, 1)
	go func() { sendErr <- sendLoop(ctx, stream, conn) }()
	resynced := make(chan struct{})
	go func() { defer close(resynced); h.s.resync(ctx, conn, hello.OwnedSessions, lg) }()
	defer func() { <-resynced }() // after cancel below: it stops at once
	recvErr := make(chan error, 1)
	go func() { recvErr <- h.recvLoop(ctx, stream, node, &lease, since, lg) }()
	select {
	case err = <-sendErr:
	case err = <-recvErr:
	case <-ctx.Done():
		err = nil
	}
	cancel()
	if errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		err = nil
	}
	return toStatus(lg, err)
}

// sendLoop is the stream's only sender. Live frames (heartbeat acks,
// deliveries, commands) go before resync frames, so a long resync never
// delays them nor fills their queue.
func sendLoop(ctx context.Context, stream castv1.NodeService_ConnectServer, c *nodeConn) error {
	for {
		var f *castv1.ConnectResponse
		select {
		case f = <-c.out:
		default:
			select {
			case <-ctx.Done():
				return nil
			case f = <-c.out:
			case f = <-c.resync:
			}
		}
		if err := stream.Send(f); err != nil {
			return err
		}
	}
}

func (h *nodeService) recvLoop(ctx context.Context, stream castv1.NodeService_ConnectServer, node *castv1.Node, lease *atomic.Int64, since time.Time, lg *zap.Logger) error {
	seen := time.Now() // registering recorded it
	for {
		f, err := stream.Recv()
		if err != nil {
			return err
		}
		switch fr := f.Frame.(type) {
		case *castv1.ConnectRequest_Heartbeat:
			if err := h.heartbeat(ctx, node, lease, since, &seen, lg); err != nil {
				return err
			}
			h.s.hub.send(node.Name, &castv1.ConnectResponse{Frame: &castv1.ConnectResponse_HeartbeatAck{
				HeartbeatAck: &castv1.HeartbeatAck{Seq: fr.Heartbeat.Seq}}})
		case *castv1.ConnectRequest_Ack:
			if fr.Ack.Error != "" {
				lg.Warn("node reported command failure", zap.String("command", fr.Ack.CommandId), zap.String("error", fr.Ack.Error))
			}
		case *castv1.ConnectRequest_NodeInfo:
			if err := h.updateAgents(ctx, node, fr.NodeInfo, fence.Lease(lease.Load()), lg); err != nil {
				return err
			}
		case *castv1.ConnectRequest_Hello:
			return invalid("hello may only be sent once per stream")
		}
	}
}

// updateAgents stores what a connected node now advertises of its agents
// (`cast nodes` shows an agent ready once the user logs in, without a
// reconnect). node is the stream's copy of the hello: a re-registration
// after a lapsed lease carries the new list too. A store error ends the
// stream, and the node's next hello carries the list.
func (h *nodeService) updateAgents(ctx context.Context, node *castv1.Node, info *castv1.NodeInfo, l fence.Lease, lg *zap.Logger) error {
	if err := validAgents(info.Agents); err != nil {
		return err
	}
	node.Agents = info.Agents
	err := storeBound(ctx, "storing the node's agents", func(ctx context.Context) error {
		return h.s.store.UpdateNodeAgents(ctx, node.Name, l, info.Agents)
	})
	if errors.Is(err, store.ErrLeaseExpired) {
		return nil // the next heartbeat registers the node again, with these agents
	}
	if err == nil {
		lg.Info("node agents updated", zap.Int("agents", len(info.Agents)))
	}
	return err
}

// resync re-sends ownership of every session the node owns, so a node that
// restarted or reconnected knows its sessions and their current tokens, and
// releases those it believes it owns but lost meanwhile (a laptop that
// slept through a migration stops their agents). It runs beside the send
// loop and waits on it for each frame: a node owning 10,000 sessions gets
// them at the pace it reads, and only a stuck peer is ever cut. An
// assignment that races a move (read before it, sent after its release)
// is harmless: the store fences the node's writes by token, and the node
// drops a session whose writes come back NOT_OWNER.
func (s *Server) resync(ctx context.Context, c *nodeConn, believed []string, lg *zap.Logger) {
	s.adoptUnowned(ctx, c.name, lg) // assigned below with the rest it owns
	mine := map[string]bool{}
	err := s.store.EachOwnedSession(ctx, c.name, func(page []fence.OwnedSession) error {
		for _, o := range page {
			mine[o.Session.Id] = true
			if err := s.hub.push(ctx, c, "assign_session", assignCmd(o.Session, o.Token)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		if ctx.Err() == nil {
			lg.Warn("resync of owned sessions failed", zap.Error(err))
		}
		return
	}
	var lost []string
	for _, id := range believed {
		if !mine[id] && ids.ValidSessionID(id) {
			mine[id] = true // listed twice: released once
			lost = append(lost, id)
		}
	}
	owners, err := s.movedFrom(ctx, c.name, lost)
	if err != nil {
		if ctx.Err() == nil {
			lg.Warn("look up owners of lost sessions failed", zap.Error(err))
		}
		return
	}
	for _, id := range lost {
		if s.hub.push(ctx, c, "release_session", releaseCmd(id, owners[id])) != nil {
			return
		}
	}
	lg.Info("node resync sent", zap.Int("assigned", len(mine)-len(lost)), zap.Int("released", len(lost)))
}

// movedFrom is the owner of each of lost a node may be told: the target
// of a migration that moved it from node, which the node knows already
// (its export named it) and needs to clean its checkout once released.
// Any other session it names it learns only is not its own: a node could
// list ids it had learnt and be told which node holds each.
func (s *Server) movedFrom(ctx context.Context, node string, lost []string) (map[string]string, error) {
	return s.store.MovedFrom(ctx, node, lost)
}

func validNode(n *castv1.Node) error {
	if err := refuse(
		validate.Need(validate.Name, "node.name", n.Name),
		validate.Each(validate.Name, "node.labels", n.Labels, 64),
		validate.Check(validate.Ident, "node.os", n.Os),
		validate.Check(validate.Ident, "node.hostname", n.Hostname),
	); err != nil {
		return err
	}
	return validAgents(n.Agents)
}

// validAgents checks the agents a node advertises (in hello or NodeInfo).
func validAgents(list []*castv1.AgentInstall) error {
	if len(list) > 64 {
		return invalid("a node may list at most 64 agents")
	}
	for i, a := range list {
		f := func(name string) string { return fmt.Sprintf("node.agents[%d].%s", i, name) }
		if err := refuse(
			validate.Need(validate.Name, f("name"), a.Name),
			validate.Check(validate.Reason, f("version"), a.Version), // as the CLI printed it
			validate.Check(validate.Ident, f("path"), a.Path),
			validate.Check(validate.Cwd, f("home"), a.Home),
			validate.Check(validate.Cwd, f("agent_dir"), a.AgentDir),
		); err != nil {
			return err
		}
	}
	return nil
}

// probeNodeTimeout bounds a node's probe of its agents: one CLI at a
// time, each bounded by the node's probe timeout (a minute by default).
const probeNodeTimeout = 5 * time.Minute

// ProbeNode asks a connected node to probe its agents now, over its
// stream (a WorkspaceRequest, answered by ReportWorkspace), and returns
// what it found; the node advertises it too, so `cast nodes` shows it.
func (h *nodeService) ProbeNode(ctx context.Context, req *castv1.ProbeNodeRequest) (*castv1.ProbeNodeResponse, error) {
	if err := refuse(validate.Need(validate.Name, "node", req.Node)); err != nil {
		return nil, err
	}
	if up, err := h.s.store.NodeConnected(ctx, req.Node); err != nil {
		return nil, toStatus(h.s.lg, err)
	} else if !up {
		return nil, toStatus(h.s.lg, errs.New(errs.KindFailedPrecondition, errs.ReasonNodeNotConn,
			"node %s is not connected; only a running node can probe its agents (`cast nodes` shows which are up)", req.Node).With("node", req.Node))
	}
	ans, err := h.s.askNodeWithin(ctx, req.Node, &castv1.WorkspaceRequest{Op: &castv1.WorkspaceRequest_Probe{Probe: &castv1.ProbeAgentsRequest{}}}, probeNodeTimeout)
	if err != nil {
		return nil, toStatus(h.s.lg, err)
	}
	return &castv1.ProbeNodeResponse{Agents: ans.Agents}, nil
}

// adoptUnowned gives node the sessions stored while no node was connected
// (store.AdoptUnowned) and returns them; a failure leaves them for the
// next node to connect.
func (s *Server) adoptUnowned(ctx context.Context, node string, lg *zap.Logger) []fence.OwnedSession {
	took, err := s.store.AdoptUnowned(ctx, node)
	if err != nil {
		if ctx.Err() == nil {
			lg.Warn("adopt unowned sessions failed", zap.Error(err))
		}
		return nil
	}
	if len(took) > 0 {
		lg.Info("node adopted sessions stored while no node was connected", zap.Int("sessions", len(took)))
	}
	return took
}

// placeSession decides a new session's node and its folder there
// (placement.Place), asking nodes for the folder when it must.
func (s *Server) placeSession(ctx context.Context, w placement.Want) (placement.Placed, error) {
	nodes, err := s.store.ListNodes(ctx)
	if err != nil {
		return placement.Placed{}, err
	}
	return placement.Place(ctx, nodes, w, s.findFolder)
}

// findFolderTimeout bounds a node's answer to a placement's question (a
// stat on the node): a node that is slow to answer is passed over, named in
// the refusal, rather than holding up `cast new`.
const findFolderTimeout = 5 * time.Second

// findFolder is placement.FindFolder over the node command round trip.
// Placement quotes its error in the refusal the caller sees: a node's
// refusal or silence as it is (it names the node), any other failure (the
// store's, an answer that does not decode) as toStatus would tell it,
// which logs the raw error.
func (s *Server) findFolder(ctx context.Context, node, cwd string) (string, error) {
	ans, err := s.askNodeWithin(ctx, node, &castv1.WorkspaceRequest{Op: &castv1.WorkspaceRequest_Find{Find: &castv1.FindFolderRequest{Cwd: cwd}}}, findFolderTimeout)
	if e, ok := errs.As(err); ok && e.Kind != errs.KindInternal {
		return "", err
	} else if err != nil {
		return "", fmt.Errorf("node %s: %s", node, statusMessage(s.lg.With(zap.String("node", node)), err))
	}
	return ans.Folder, nil // checked as a Cwd when the node reported it
}

// heartbeat answers one node heartbeat: the node's credential still holds,
// its lease is renewed (no etcd write), and its last_seen_time is written
// once per SeenEvery (seen: when it last was). A lease that lapsed (the
// node was silent past its TTL and marked down) is registered anew.
func (h *nodeService) heartbeat(ctx context.Context, node *castv1.Node, lease *atomic.Int64, since time.Time, seen *time.Time, lg *zap.Logger) error {
	h.s.m.Heartbeats.Inc()
	// A credential revoked on another replica ends the stream here.
	if err := h.s.stillAuthenticated(ctx); err != nil {
		return err
	}
	l := fence.Lease(lease.Load())
	err := storeBound(ctx, "renewing the node's lease", func(ctx context.Context) error {
		err := h.s.store.Heartbeat(ctx, l)
		if err == nil && time.Since(*seen) >= h.s.cfg.SeenEvery {
			if err = h.s.store.NodeSeen(ctx, node.Name, l, h.s.cfg.ReplicaID, since); err == nil {
				*seen = time.Now()
			}
		}
		return err
	})
	if !errors.Is(err, store.ErrLeaseExpired) {
		return err
	}
	lg.Info("node lease had lapsed; registering again")
	err = storeBound(ctx, "registering the node again", func(ctx context.Context) (err error) {
		l, err = h.s.store.RegisterNode(ctx, node, h.s.cfg.ReplicaID, h.s.cfg.LeaseTTL)
		return err
	})
	if err != nil {
		return err
	}
	lease.Store(int64(l))
	*seen = time.Now()
	// While its lease had lapsed no node may have been connected, and an
	// import stored unowned. Not bounded: etcd just answered, and a
	// thousand imports take a txn each.
	for _, o := range h.s.adoptUnowned(ctx, node.Name, lg) {
		h.s.hub.command(node.Name, "assign_session", assignCmd(o.Session, o.Token))
	}
	return nil
}

// storeWait is how long a call waits for the store on a caller's behalf
// (a node's stream, a credential check) before it is refused UNAVAILABLE.
const storeWait = 5 * time.Second

// storeBound runs call, a store call of a node's stream (doing what),
// within the store's bound. The stream's context has no deadline: while
// etcd cannot be reached the call would wait as long as it is away, and
// the node's stream hang on this replica. Bounded as the credential check
// is, the stream ends UNAVAILABLE and the node connects again, to a
// replica that can reach etcd.
func storeBound(ctx context.Context, doing string, call func(context.Context) error) error {
	bctx, cancel := context.WithTimeout(ctx, storeWait)
	defer cancel()
	err := call(bctx)
	if err != nil && ctx.Err() == nil && bctx.Err() != nil { // the bound's deadline, not the stream's end
		return errs.New(errs.KindUnavailable, errs.ReasonUnavailable,
			"the store did not answer within %s while %s; connect again", storeWait, doing)
	}
	return err
}
