package controlplane

import (
	"context"
	"sync"

	"go.uber.org/zap"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/metrics"
)

// hub holds the node streams connected to this replica. Each stream has one
// sender goroutine (gRPC streams are not safe for concurrent Send), fed by a
// bounded queue; a node too slow to drain it is disconnected and catches up
// on reconnect, because everything it is sent is also in the store.
type hub struct {
	lg *zap.Logger
	m  *metrics.ControlPlane

	mu    sync.Mutex
	conns map[string]*nodeConn
}

type nodeConn struct {
	name string
	out  chan *castv1.ConnectResponse
	// resync carries the reconnect resync (one frame per owned or lost
	// session). Its producer blocks on it, so a resync of any size flows
	// at the pace the node reads, and out keeps its room for live traffic.
	resync chan *castv1.ConnectResponse
	kill   func() // ends the stream
}

func newNodeConn(name string, kill func(), queue int) *nodeConn {
	return &nodeConn{name: name, out: make(chan *castv1.ConnectResponse, queue),
		resync: make(chan *castv1.ConnectResponse), kill: kill}
}

// push hands a resync command to the send loop, waiting for it (never
// cutting the stream); it fails only when the stream ends.
func (h *hub) push(ctx context.Context, c *nodeConn, kind string, cmd *castv1.Command) error {
	cmd.Id = ids.NewClientID()
	select {
	case c.resync <- &castv1.ConnectResponse{Frame: &castv1.ConnectResponse_Command{Command: cmd}}:
		h.m.CommandsSent.WithLabelValues(kind).Inc()
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func newHub(lg *zap.Logger, m *metrics.ControlPlane) *hub {
	metrics.Preinit(m.CommandsSent, commandKinds) // at 0: the dashboard's rates before the first command
	return &hub{lg: lg.Named("hub"), m: m, conns: map[string]*nodeConn{}}
}

// commandKinds are the kind label values of cast_controlplane_node_commands_total.
var commandKinds = []string{"assign_session", "release_session", "interrupt", "deliver_messages",
	"export_work_tree", "import_work_tree", "set_credential", "workspace", "other"}

// add registers a stream for name, ending an older stream of the same node
// (a node that reconnected before its old stream timed out).
func (h *hub) add(c *nodeConn) {
	h.mu.Lock()
	old := h.conns[c.name]
	h.conns[c.name] = c
	h.mu.Unlock()
	if old != nil {
		h.lg.Info("replacing older stream of node", zap.String("node", c.name))
		old.kill()
	}
	h.m.ConnectStreams.Inc()
}

func (h *hub) remove(c *nodeConn) {
	h.mu.Lock()
	if h.conns[c.name] == c {
		delete(h.conns, c.name)
	}
	h.mu.Unlock()
	h.m.ConnectStreams.Dec()
}

// disconnect ends node's stream here, if any (its credential was revoked).
func (h *hub) disconnect(node string) {
	h.mu.Lock()
	c := h.conns[node]
	h.mu.Unlock()
	if c != nil {
		c.kill()
	}
}

// send queues a frame for node; false when the node has no stream here.
func (h *hub) send(node string, f *castv1.ConnectResponse) bool {
	h.mu.Lock()
	c := h.conns[node]
	h.mu.Unlock()
	if c == nil {
		return false
	}
	select {
	case c.out <- f:
		return true
	default:
		h.lg.Warn("node stream queue full; disconnecting node", zap.String("node", node))
		c.kill()
		return false
	}
}

// command sends cmd to node, counted under kind. A command relayed from
// the store keeps the id it was recorded with.
func (h *hub) command(node, kind string, cmd *castv1.Command) bool {
	if cmd.Id == "" {
		cmd.Id = ids.NewClientID()
	}
	if !h.send(node, &castv1.ConnectResponse{Frame: &castv1.ConnectResponse_Command{Command: cmd}}) {
		return false
	}
	h.m.CommandsSent.WithLabelValues(kind).Inc()
	return true
}

// interrupt asks the owner node to stop the session's turn; false means
// the node's stream is not on this replica. abandon (a migration) keeps the
// turn's prompt undelivered, for the new owner to run; agent (a switch's)
// stops only a turn running that agent.
func (h *hub) interrupt(node, sessionID string, abandon bool, agent string) bool {
	return h.command(node, "interrupt", &castv1.Command{Kind: &castv1.Command_Interrupt{
		Interrupt: &castv1.Interrupt{SessionId: sessionID, Abandon: abandon, Agent: agent}}})
}

// release tells a node it lost a session to owner.
func (h *hub) release(node, sessionID, owner string) bool {
	return h.command(node, "release_session", releaseCmd(sessionID, owner))
}

// relay sends a command recorded in the store (its id already set).
func (h *hub) relay(node string, cmd *castv1.Command) bool {
	kind := "other"
	switch cmd.Kind.(type) {
	case *castv1.Command_ExportWorkTree:
		kind = "export_work_tree"
	case *castv1.Command_ImportWorkTree:
		kind = "import_work_tree"
	case *castv1.Command_SetCredential:
		kind = "set_credential"
	case *castv1.Command_Workspace:
		kind = "workspace"
	case *castv1.Command_ReleaseSession:
		kind = "release_session" // a purge's
	}
	return h.command(node, kind, cmd)
}

// assign tells the owner node it owns sess with token.
func (h *hub) assign(sess *castv1.Session, token int64) {
	h.command(sess.Node, "assign_session", assignCmd(sess, token))
}

func assignCmd(sess *castv1.Session, token int64) *castv1.Command {
	return &castv1.Command{Kind: &castv1.Command_AssignSession{
		AssignSession: &castv1.AssignSession{Session: sess, OwnerToken: token}}}
}

func releaseCmd(sessionID, owner string) *castv1.Command {
	return &castv1.Command{Kind: &castv1.Command_ReleaseSession{
		ReleaseSession: &castv1.ReleaseSession{SessionId: sessionID, Owner: owner}}}
}

// deliver hands new user messages to the owner node.
func (h *hub) deliver(node, sessionID string, token int64, msgs []*castv1.Message) {
	h.command(node, "deliver_messages", &castv1.Command{Kind: &castv1.Command_DeliverMessages{
		DeliverMessages: &castv1.DeliverMessages{SessionId: sessionID, OwnerToken: token, Messages: msgs}}})
}
