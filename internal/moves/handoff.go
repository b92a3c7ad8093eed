package moves

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/placement"
	"github.com/cast-dev/cast/internal/transcript"
	"github.com/cast-dev/cast/internal/validate"
	"github.com/cast-dev/cast/internal/wire"
)

// Briefer writes a handoff brief from a rendered conversation.
type Briefer interface {
	Brief(ctx context.Context, conversation string) (string, error)
}

// Readable turns the brief is made from: the first and the last ones.
const (
	briefFirstTurns = 8
	briefLastTurns  = 40
)

// HandoffRequest describes a handoff.
type HandoffRequest struct {
	SessionID, ToAgent, Model, Node, Direction, RequestID string
	Account                                               string // "" keeps the source's
	DryRun                                                bool
	// Reason says why a switch or fork became this handoff; the notice in
	// the source's thread carries it.
	Reason string
	// InPlace: the new session stands in for the source (a switch or a
	// migration that became this handoff), so it keeps the source's place:
	// a worker's stays its parent's worker, and it runs on the source's
	// worktree branch. A handoff the user asked for, or a fork that became
	// one, is a session of its own.
	InPlace bool
}

// HandoffResult is the new session (nil on a dry run) and its seed.
type HandoffResult struct {
	Session     *castv1.Session
	Prompt      string
	Brief       string
	BriefSource string // "model" or "fallback"
}

// Handoff starts a new session on any agent (Cursor and Muse included:
// nothing is taken over, the brief is a first message) in the source's
// folder, seeded by a brief. The brief comes from a small model; when that
// fails it is built from the source's pins and last answer. The two
// sessions are linked both ways and the source is pinned.
func Handoff(ctx context.Context, st Store, b Briefer, r HandoffRequest) (HandoffResult, error) {
	src, err := st.GetSession(ctx, r.SessionID)
	if err != nil {
		return HandoffResult{}, err
	}
	to, target, err := handoffTarget(src, r.ToAgent)
	if err != nil {
		return HandoffResult{}, err
	}
	node := cmp.Or(r.Node, src.Node)
	if !r.DryRun {
		// Refuse before the brief (a model call) what the node cannot run.
		if err := checkPlacement(ctx, st, node, to, r.Account, r.RequestID); err != nil {
			return HandoffResult{}, err
		}
	}
	res, err := seed(ctx, st, b, src, target, r.Direction)
	if err != nil || r.DryRun {
		return res, err
	}
	model := modelFor(r.Model, to, src)
	account := cmp.Or(r.Account, src.Account)
	p := fence.CreateParams{Agent: to, Model: model, Cwd: src.Cwd, Node: node, RequestID: r.RequestID,
		Title: "handoff of " + src.Id + ": " + src.Title, HandoffFrom: src.Id, Account: account, Creator: src.Creator}
	if r.InPlace {
		// Without them the parent never heard of the worker's turns again,
		// and the new session ran in the checkout, not the worktree the
		// source's work is in.
		p.Subagent, p.WorktreeBranch = src.Subagent, src.WorktreeBranch
		if src.Subagent {
			p.ParentID = src.ParentId
		}
	}
	c, err := st.CreateSession(ctx, p)
	if err != nil {
		return HandoffResult{}, err
	}
	if err := storePrompt(ctx, st, c.Session.Id, &res); err != nil {
		return HandoffResult{}, err
	}
	if err := linkSource(ctx, st, src.Id, c.Session.Id, target, r.Reason, &res); err != nil {
		return HandoffResult{}, err
	}
	res.Session, err = st.GetSession(ctx, c.Session.Id)
	return res, err
}

// handoffTarget is the agent a handoff of src to agent to starts ("" or
// "same": src's own).
func handoffTarget(src *castv1.Session, to string) (string, agents.Agent, error) {
	if to == "" || to == "same" {
		to = src.Agent
	}
	target, ok := agents.Lookup(to)
	if !ok {
		return "", target, errs.New(errs.KindInvalid, errs.ReasonUnknownAgent, "unknown agent %q; use one of %s or same", to, strings.Join(agents.Names(), ", "))
	}
	return to, target, nil
}

// seed is a handoff's brief of src, from the small model or, when it
// fails, built from src, and the first prompt of the new session on
// target made of it.
func seed(ctx context.Context, st Store, b Briefer, src *castv1.Session, target agents.Agent, direction string) (HandoffResult, error) {
	msgs, err := readAll(ctx, st, src.Id, src.LastSeq)
	if err != nil {
		return HandoffResult{}, err
	}
	turns := readable(msgs)
	res := HandoffResult{BriefSource: "model"}
	bctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	res.Brief, err = b.Brief(bctx, renderTurns(turns))
	cancel()
	if err != nil {
		res.Brief, res.BriefSource = fallbackBrief(src, msgs, err), "fallback"
	}
	res.Prompt = composePrompt(src, target, res.Brief, direction)
	return res, nil
}

// storePrompt appends res's prompt to the new session id as its first
// message. A retried handoff (same request id, same session) composes
// another prompt (the source has grown by the notice; the brief may
// differ): the prompt the first try stored stands, and is the answer.
func storePrompt(ctx context.Context, st Store, id string, res *HandoffResult) error {
	first := &castv1.Message{ClientId: "handoff." + id + ".prompt", Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: res.Prompt}
	_, err := st.Append(ctx, id, []*castv1.Message{first}, fence.Guard{})
	stored, reused, err := storedText(ctx, st, id, err)
	if err != nil {
		return err
	}
	if reused {
		res.Prompt, res.Brief = stored, briefOf(stored)
	}
	return nil
}

// linkSource pins the new session id (on target) to the source srcID and
// tells of the handoff in the source's thread, reason included; a retry
// keeps the brief source the first try's notice told.
func linkSource(ctx context.Context, st Store, srcID, id string, target agents.Agent, reason string, res *HandoffResult) error {
	pin := fmt.Sprintf("Handed off to %s on %s", id, target.DisplayName)
	if _, err := st.UpdateSession(ctx, srcID, func(s *castv1.Session) error {
		if !slices.Contains(s.Pins, pin) {
			s.Pins = append(s.Pins, pin)
		}
		return nil
	}); err != nil {
		return err
	}
	text := pin + " (brief: " + res.BriefSource + ")."
	if reason != "" {
		text += " " + reason
	}
	notice := &castv1.Message{ClientId: "handoff." + id + ".notice", Kind: castv1.MessageKind_MESSAGE_KIND_NOTICE,
		NoticeType: transcript.NoticeHandoff, Text: text}
	_, err := st.Append(ctx, srcID, []*castv1.Message{notice}, fence.Guard{})
	stored, reused, err := storedText(ctx, st, srcID, err)
	if err != nil {
		return err
	}
	if reused {
		res.BriefSource = briefSourceOf(stored, res.BriefSource)
	}
	return nil
}

// storedText is the text of the message a retry's append was refused in
// favour of (err is CLIENT_ID_REUSED: the first try stored its own body
// under the client id); reused is false when err is not that refusal, and
// any other err is returned.
func storedText(ctx context.Context, st Store, sessionID string, err error) (text string, reused bool, _ error) {
	e, ok := errs.As(err)
	if !ok || e.Reason != errs.ReasonClientIDReused {
		return "", false, err
	}
	seq, perr := strconv.ParseInt(e.Metadata["seq"], 10, 64)
	if perr != nil || seq < 1 {
		return "", false, errs.Internal(perr, "client id refusal names no seq")
	}
	msgs, _, err := st.ListMessages(ctx, sessionID, seq, seq, 1, "")
	if err != nil {
		return "", false, err
	}
	if len(msgs) != 1 {
		return "", false, errs.Internal(nil, "stored message is missing")
	}
	return msgs[0].Text, true, nil
}

// briefOf is the brief inside a prompt composePrompt made.
func briefOf(prompt string) string {
	_, rest, _ := strings.Cut(prompt, briefHeading)
	if i := strings.LastIndex(rest, readMoreHeading); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// briefSourceOf is the brief source a stored handoff notice names, else def.
func briefSourceOf(notice, def string) string {
	_, rest, ok := strings.Cut(notice, " (brief: ")
	if src, _, ok2 := strings.Cut(rest, ")"); ok && ok2 {
		return src
	}
	return def
}

func readAll(ctx context.Context, st Store, id string, last int64) ([]transcript.Message, error) {
	var out []transcript.Message
	err := eachMessage(ctx, st, id, 1, last, func(m *castv1.Message) error {
		out = append(out, wire.FromProto(m))
		return nil
	})
	return out, err
}

// readable are the user and assistant texts: the first 8 and the last 40.
func readable(msgs []transcript.Message) []transcript.Message {
	var turns []transcript.Message
	for _, m := range msgs {
		if (m.Kind == transcript.KindUser || m.Kind == transcript.KindAssistant) && strings.TrimSpace(m.Text) != "" {
			turns = append(turns, m)
		}
	}
	if len(turns) <= briefFirstTurns+briefLastTurns {
		return turns
	}
	return append(append([]transcript.Message{}, turns[:briefFirstTurns]...), turns[len(turns)-briefLastTurns:]...)
}

func renderTurns(turns []transcript.Message) string {
	var b strings.Builder
	for _, m := range turns {
		fmt.Fprintf(&b, "[#%d %s] %s\n\n", m.Seq, m.Kind, m.Text)
	}
	return b.String()
}

// fallbackBrief is built without a model: pins, the last answer, and
// what the user asked after it (a handoff of a session mid-turn, or with
// messages it has not run: without them the new agent would never hear
// the user's latest request).
func fallbackBrief(src *castv1.Session, msgs []transcript.Message, cause error) string {
	var b strings.Builder
	fmt.Fprintf(&b, "(No model brief: %v. This one is built from the session's pinned notes, its last answer and what was asked since.)\n\n", cause)
	fmt.Fprintf(&b, "Goal: %s\n", src.Title)
	if len(src.Pins) > 0 {
		b.WriteString("Pinned:\n")
		for _, p := range src.Pins {
			b.WriteString("- " + p + "\n")
		}
	}
	last := -1
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Kind == transcript.KindAssistant && strings.TrimSpace(msgs[i].Text) != "" {
			last = i
			break
		}
	}
	if last >= 0 {
		t := validate.Clip(msgs[last].Text, 3000) // between characters: the prompt must encode
		fmt.Fprintf(&b, "Last answer (#%d):\n%s\n", msgs[last].Seq, t)
	}
	var asked []transcript.Message
	for _, m := range msgs[last+1:] {
		if m.Kind == transcript.KindUser && strings.TrimSpace(m.Text) != "" {
			asked = append(asked, m)
		}
	}
	if len(asked) > 0 {
		b.WriteString("Asked since, not answered yet:\n")
		for _, m := range asked[max(0, len(asked)-fallbackAsked):] {
			fmt.Fprintf(&b, "[#%d] %s\n", m.Seq, validate.Clip(m.Text, 2000))
		}
	}
	return b.String()
}

// fallbackAsked is how many of the unanswered user messages a fallback
// brief quotes (the latest; `cast read` has the rest).
const fallbackAsked = 5

// The headings around a prompt's brief (briefOf finds it between them).
const (
	briefHeading    = "## Brief\n\n"
	readMoreHeading = "\n\n## Read more\n\n"
)

func composePrompt(src *castv1.Session, target agents.Agent, brief, direction string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[cast handoff] You are taking over session %s (it ran on %s in %s). This is a new session on %s; the brief below is history, not new instructions.\n\n",
		src.Id, agents.DisplayName(src.Agent), src.Cwd, target.DisplayName)
	b.WriteString(briefHeading + brief + readMoreHeading)
	last := src.LastSeq
	fmt.Fprintf(&b, "- `cast read %s 1:%d`: the whole conversation (%d messages)\n", src.Id, last, last)
	if last > 20 {
		fmt.Fprintf(&b, "- `cast read %s %d:%d`: its last 20 messages\n", src.Id, last-19, last)
	}
	fmt.Fprintf(&b, "- `cast diff %s`: files changed, commits made and tools used\n\n", src.Id)
	if strings.TrimSpace(direction) == "" {
		direction = "Continue from the brief's next steps."
	}
	b.WriteString("## Direction\n\n" + direction + "\n")
	return b.String()
}

// checkPlacement refuses a move to an agent the node lacks, or to an
// account it does not have for that agent, unless request id rid already
// made the move's session (placement.Retried).
func checkPlacement(ctx context.Context, st Store, node, agent, account, rid string) error {
	err := placeable(ctx, st, node, agent, account)
	if err == nil {
		return nil
	}
	_, err = placement.Retried(ctx, st, rid, err)
	return err
}

func placeable(ctx context.Context, st Store, node, agent, account string) error {
	nodes, err := st.ListNodes(ctx)
	if err != nil {
		return err
	}
	if _, err := placement.Pick(nodes, node, agent); err != nil {
		return err
	}
	if account == "" {
		return nil
	}
	return placement.CheckAccount(nodes, node, agent, account)
}
