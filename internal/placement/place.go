package placement

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/cast-dev/cast/internal/errs"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// Want is what a new session asks of placement.
type Want struct {
	// Node is the node asked for (--node, or a worker's parent's node).
	Node string
	// Origin is the node on the caller's own machine (its context's
	// node:), "" when the context names none.
	Origin string
	Agent  string
	// Cwd is the folder as the caller's machine names it; "" asks for no
	// folder (the node's own default).
	Cwd string
	// CwdOnCaller: Cwd is a folder on the caller's machine (cast says so),
	// so a Node asked for is asked for its path for it too. Otherwise (an
	// API caller, a worker beside its parent) Cwd is that node's own path.
	CwdOnCaller bool
	// Import: the session runs no CLI until it is given a message and may
	// record a folder no node has. With no node that has the folder, the
	// first connected with the agent takes it, Cwd as it is; with none that
	// has the agent, any connected node (PickOwner).
	Import bool
}

// Placed is where a session goes and its folder there.
type Placed struct {
	Node string
	// Cwd is the node's own path for Want.Cwd (its --map-path applied).
	Cwd string
}

// FindFolder asks node for its path of cwd, a folder on the caller's
// machine; the error says why it has none there, or that it did not
// answer. Callers bound it: placement waits for it. Its error's text goes
// into the refusal the caller sees as it is, so it must be fit to show
// (no store's or decoder's raw text).
type FindFolder func(ctx context.Context, node, cwd string) (string, error)

// Place decides where a new session runs: the node asked for, in its path
// for the caller's folder (asked like any other; refused with its answer
// when it has none there); else the caller's own node (Origin) when it is connected with the agent, in the
// caller's folder as it is; else the first node, in list order, of those
// connected with the agent that answers that the folder is there (at its
// mapped path); else a refusal naming each node asked and its answer.
// Nodes are asked at once; a node is waited for only while no node before
// it in the list has said yes.
func Place(ctx context.Context, nodes []*castv1.Node, w Want, find FindFolder) (Placed, error) {
	pick := Pick
	if w.Import {
		pick = PickOwner
	}
	if w.Node != "" {
		return placeOn(ctx, nodes, w, pick, find)
	}
	ready := withAgent(nodes, w.Agent)
	if len(ready) == 0 {
		n, err := pick(nodes, w.Node, w.Agent) // with no node ready, the refusal naming what is there
		return Placed{Node: n, Cwd: w.Cwd}, err
	}
	for _, n := range ready {
		if n.Name == w.Origin {
			return Placed{Node: n.Name, Cwd: w.Cwd}, nil
		}
	}
	if w.Cwd == "" {
		return Placed{Node: ready[0].Name}, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answers := make([]chan answer, len(ready))
	for i, n := range ready {
		answers[i] = make(chan answer, 1)
		go func() {
			path, err := find(ctx, n.Name, w.Cwd)
			answers[i] <- answer{path, err}
		}()
	}
	why := make([]string, 0, len(ready))
	for i, n := range ready {
		a := <-answers[i]
		if a.err == nil && a.path != "" {
			return Placed{Node: n.Name, Cwd: a.path}, nil
		}
		if a.err == nil {
			a.err = fmt.Errorf("node %s: no folder %s here", n.Name, w.Cwd)
		}
		why = append(why, a.err.Error())
	}
	if w.Import {
		return Placed{Node: ready[0].Name, Cwd: w.Cwd}, nil
	}
	return Placed{}, errs.New(errs.KindFailedPrecondition, errs.ReasonNoNode,
		"no connected node with the %s CLI has the folder %s: %s; %s; run it on a node that has it with --node NAME, or map the folder with node --map-path FROM=TO",
		w.Agent, w.Cwd, originState(nodes, w.Origin, w.Agent), strings.Join(why, "; ")).With("agent", w.Agent)
}

// placeOn places on the node asked for (w.Node): it must have the agent
// (an import: be connected) and answer that the caller's folder is there,
// after its
// --map-path, when Cwd is the caller's (CwdOnCaller). An import keeps a
// folder the node lacks, as Place does.
func placeOn(ctx context.Context, nodes []*castv1.Node, w Want, pick func([]*castv1.Node, string, string) (string, error), find FindFolder) (Placed, error) {
	n, err := pick(nodes, w.Node, w.Agent)
	if err != nil || w.Cwd == "" || !w.CwdOnCaller {
		return Placed{Node: n, Cwd: w.Cwd}, err
	}
	path, err := find(ctx, n, w.Cwd)
	switch {
	case err == nil && path != "":
		return Placed{Node: n, Cwd: path}, nil
	case w.Import:
		return Placed{Node: n, Cwd: w.Cwd}, nil
	case err == nil:
		err = fmt.Errorf("node %s: no folder %s here", n, w.Cwd)
	}
	return Placed{}, errs.New(errs.KindFailedPrecondition, errs.ReasonNoNode,
		"cannot run on node %s in %s: %s; drop --node to run it on a node that has the folder, or map the folder on %s with node --map-path FROM=TO",
		n, w.Cwd, err.Error(), n).With("node", n)
}

type answer struct {
	path string
	err  error
}

// withAgent are the connected nodes that have agent, in list order.
func withAgent(nodes []*castv1.Node, agent string) []*castv1.Node {
	var out []*castv1.Node
	for _, n := range nodes {
		if n.Connected && install(n, agent) != nil {
			out = append(out, n)
		}
	}
	return out
}

// originState says why the caller's own node did not take the session.
func originState(nodes []*castv1.Node, origin, agent string) string {
	if origin == "" {
		return "your cast context names no node on this machine (`node:`; `cast node join` writes it)"
	}
	for _, n := range nodes {
		switch {
		case n.Name != origin:
		case !n.Connected:
			return fmt.Sprintf("this machine's node %s is not connected", origin)
		default:
			return fmt.Sprintf("this machine's node %s has no %s CLI", origin, agent)
		}
	}
	return fmt.Sprintf("this machine's node %s (your cast context's node:) is not registered", origin)
}

// Requests says which session a create with request key rk made (the
// store's record of request keys, fence.RequestKey).
type Requests interface {
	RequestedSession(ctx context.Context, rk string) (string, bool, error)
}

// Retried is the session a create (a new session, a fork, a handoff) with
// request key rk already made, or refused (placement's refusal of it) when
// none did: a retry needs no placing, and placing it again refused it once
// its node was down. The store's create answers the retry from rk, or
// refuses a reuse of rk for another create.
func Retried(ctx context.Context, r Requests, rk string, refused error) (string, error) {
	if rk == "" {
		return "", refused
	}
	id, made, err := r.RequestedSession(ctx, rk)
	if err != nil || !made {
		return "", cmp.Or(err, refused)
	}
	return id, nil
}
