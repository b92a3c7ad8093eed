// Package deliverycheck checks cast's delivery rule against what a model
// received: every user message the store acknowledged reaches the next
// model request of the session's current agent exactly once, in order, as a
// user turn or as history, whatever happened in between (interrupt, switch,
// fork, migration, node or control plane restart). Like porcupine, it knows
// nothing of cast: it reads a History (the acknowledged messages, the
// sessions' fork lineage, the requests a fake model received, the faults
// and the probes a driver recorded on one clock) and returns Violations
// with what each one saw. It does no I/O; internal/e2e/delivery drives real
// processes and feeds it.
//
// # Marks
//
// Each message carries a unique mark (Mark: session and index, e.g.
// "DLV-s2-0007-END"). Marks are looked for in the text of every item of a
// request (any role: the fake model's answers in the driver never quote a
// prompt, so a mark in an assistant item would itself be a copy), left to
// right, items in order. A mark the History does not list (a send that was
// never acknowledged) is ignored.
//
// # Whose request
//
// A request belongs to the deepest session among the marks it holds: a fork
// holds its parent's messages up to the fork point, then its own. Marks of
// sessions that are not on one ancestor chain are a violation (mixed).
//
// # New turn and history
//
// A request starts a turn when no assistant item, tool call or tool result
// follows its last user text item holding a mark (a request that follows a
// tool result is the same turn going on). In that item, the new turn is the
// text after the last HistoryEnd: the part before it is a framed slice of
// history (a delta after a switch, a seed), which carries missed
// messages as history. Every other mark of the request is history. Pending
// messages joined into one prompt are all part of the new turn.
//
// # Properties
//
//  1. In any one request, each mark appears at most once (duplicate), only
//     marks of the request's session lineage appear (foreign), and they
//     appear in lineage order (order). The model's own answers, when the
//     driver marks them (AnswerMark), appear at most once too (echo): a
//     native session resumed with a slice of history that repeats what it
//     already holds sends the agent its own words back.
//  2. A message is the new turn of at most one request of its session
//     (rerun), except when a fault lies between the two requests: a node or
//     control plane kill -9, or a migration (its drain abandons a running
//     turn, which the destination runs again by design), or a signal from
//     outside to the session's own agent CLI (a fault naming a session
//     excuses that session's re-runs only). A fault counts when it ended
//     after the first request and started before the second.
//     A message a fork inherited is history there and never its new turn
//     (inherited).
//  3. Liveness: a probe message sent at quiescence (every node up, every
//     session idle) is the new turn of a request (unanswered) from the
//     session's current agent (agent), and that request holds every
//     acknowledged message of the session's lineage sent before it
//     (missing), each once and in order by property 1.
//  4. Refused turns: messages named by an undelivered notice are left out of
//     property 3, as docs/architecture.md ("Node runtime") says; the notice
//     must answer a request the model refused that carried one of them as
//     its new turn (undelivered), or it hid a message no model refused.
//  5. Killed CLIs: the node holds the turn of a CLI killed from outside
//     and runs it with the next message, or at the node's next start. So
//     after a fault naming a session, the session's first request that
//     starts a turn holds every message of its lineage acknowledged
//     before the fault (carried), each once and in order by property 1,
//     and re-running the killed turn's message is no rerun (property 2).
//  6. Resumption: a node stopped with its CLIs by its service manager
//     and started again finishes what the stop cut without a new
//     message. A Resume records what the store said after it, with
//     nothing sent since the fault: every message of the session
//     acknowledged before the fault, unless an undelivered notice names
//     it, is within its delivered seq (resumed).
package deliverycheck
