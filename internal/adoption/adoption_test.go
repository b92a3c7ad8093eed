package adoption_test

import (
	"context"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/adoption"
	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

func msg(kind castv1.MessageKind, text, cid string) *castv1.Message {
	return &castv1.Message{Kind: kind, Text: text, ClientId: cid}
}

// Over a real store: the first batch of an origin makes its session once
// (a retry, as after a node crash, finds the same one, each message
// stored once); later batches add to it; the session records where it
// came from; a node adds only to a session it owns or one adopted from the
// same native session.
func TestKeep(t *testing.T) {
	s, ctx := twoNodes(t)
	origin := &castv1.SessionOrigin{Node: "n1", Agent: "claude", NativeId: "nat-1", Path: "/home/u/.claude/projects/p/nat-1.jsonl"}
	first := adoption.Request{Node: "n1", Principal: "node:n1", Origin: origin, Cwd: "/home/u/p", Title: "hello", History: 2,
		Messages: []*castv1.Message{
			msg(castv1.MessageKind_MESSAGE_KIND_USER, "hello", "adopt.a.1"),
			msg(castv1.MessageKind_MESSAGE_KIND_ASSISTANT, "hi", "adopt.b.1"),
		}}
	id, out, err := adoption.Keep(ctx, s, first)
	if err != nil || len(out) != 2 || out[1].Seq != 2 {
		t.Fatalf("first batch: %s %v %v", id, out, err)
	}
	again, out, err := adoption.Keep(ctx, s, first)
	if err != nil || again != id || out[1].Seq != 2 {
		t.Fatalf("the retried first batch: session %s (first %s), %v, %v", again, id, out, err)
	}
	more := adoption.Request{Node: "n1", Principal: "node:n1", Origin: origin, SessionID: id,
		Messages: []*castv1.Message{msg(castv1.MessageKind_MESSAGE_KIND_USER, "more", "adopt.c.1")}}
	if _, out, err := adoption.Keep(ctx, s, more); err != nil || out[0].Seq != 3 {
		t.Fatalf("growth: %v %v", out, err)
	}
	sess, err := s.GetSession(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if o := sess.Origin; sess.Node != "n1" || sess.LastSeq != 3 || sess.HistorySeq != 2 || sess.Title != "hello" ||
		o.GetNode() != "n1" || o.GetAgent() != "claude" || o.GetNativeId() != "nat-1" || o.GetPath() != origin.Path {
		t.Fatalf("session %+v", sess)
	}

	// n2 restored nat-1 and its user resumed it: n2 may add to it.
	elsewhere := adoption.Request{Node: "n2", Principal: "node:n2", SessionID: id,
		Origin:   &castv1.SessionOrigin{Node: "n2", Agent: "claude", NativeId: "nat-1", Path: "/home/v/.claude/projects/p/nat-1.jsonl"},
		Messages: []*castv1.Message{msg(castv1.MessageKind_MESSAGE_KIND_USER, "resumed on n2", "adopt.d.1")}}
	if _, _, err := adoption.Keep(ctx, s, elsewhere); err != nil {
		t.Fatalf("n2 adds to the session adopted from the native session it holds: %v", err)
	}
	// But not to a session of n1's it names under another native id.
	elsewhere.Origin.NativeId = "nat-2"
	if _, _, err := adoption.Keep(ctx, s, elsewhere); !errs.HasReason(err, errs.ReasonNodeMismatch) {
		t.Fatalf("n2 adds to n1's session from another native session: %v", err)
	}

	for name, bad := range map[string]adoption.Request{
		"no native id":          {Node: "n1", Principal: "node:n1", Cwd: "/p", Origin: &castv1.SessionOrigin{Agent: "claude", Path: "/p/x.jsonl"}},
		"relative path":         {Node: "n1", Principal: "node:n1", Cwd: "/p", Origin: &castv1.SessionOrigin{Agent: "claude", NativeId: "x", Path: "x.jsonl"}},
		"unknown agent":         {Node: "n1", Principal: "node:n1", Cwd: "/p", Origin: &castv1.SessionOrigin{Agent: "nope", NativeId: "x", Path: "/p/x.jsonl"}},
		"another node's origin": {Node: "n1", Principal: "node:n1", Cwd: "/p", Origin: &castv1.SessionOrigin{Node: "n2", Agent: "claude", NativeId: "x", Path: "/p/x"}},
		"no cwd on create":      {Node: "n1", Principal: "node:n1", Origin: &castv1.SessionOrigin{Agent: "claude", NativeId: "x", Path: "/p/x"}},
		// `cast restore` writes the session back under its native id.
		"native id leaving its folder": {Node: "n1", Principal: "node:n1", Cwd: "/p", Origin: &castv1.SessionOrigin{Agent: "claude", NativeId: "../../../.bashrc", Path: "/p/x.jsonl"}},
		"native id read as a flag":     {Node: "n1", Principal: "node:n1", Cwd: "/p", Origin: &castv1.SessionOrigin{Agent: "codex", NativeId: "--dangerously-bypass-approvals-and-sandbox", Path: "/p/x.jsonl"}},
		"path on two lines":            {Node: "n1", Principal: "node:n1", Cwd: "/p", Origin: &castv1.SessionOrigin{Agent: "claude", NativeId: "x", Path: "/p/x\n.jsonl"}},
		"parent native id with a slash": {Node: "n1", Principal: "node:n1", Cwd: "/p", ParentNativeID: "../p",
			Origin: &castv1.SessionOrigin{Agent: "claude", NativeId: "x", Path: "/p/x.jsonl"}},
	} {
		if _, _, err := adoption.Keep(ctx, s, bad); !errs.HasReason(err, errs.ReasonInvalidArgument) {
			t.Errorf("%s: %v, want INVALID_ARGUMENT", name, err)
		}
	}
}

// A file holding only a subagent's run that a session this node adopted
// spawned becomes that session's worker; a parent another node adopted, or
// none adopted yet, leaves it a session of its own.
func TestKeepSubagentRunUnderItsParent(t *testing.T) {
	s, ctx := twoNodes(t)
	keep := func(node, native, parent string) *castv1.Session {
		t.Helper()
		id, _, err := adoption.Keep(ctx, s, adoption.Request{Node: node, Principal: "node:" + node,
			Origin: &castv1.SessionOrigin{Node: node, Agent: "codex", NativeId: native, Path: "/home/u/.codex/sessions/" + native + ".jsonl"},
			Cwd:    "/home/u/p", Title: native, History: 1, ParentNativeID: parent,
			Messages: []*castv1.Message{msg(castv1.MessageKind_MESSAGE_KIND_USER, "task "+native, "adopt."+native+".1")}})
		if err != nil {
			t.Fatal(err)
		}
		sess, err := s.GetSession(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return sess
	}
	parent := keep("n1", "main-1", "")
	cases := []struct {
		name, node, native, parent string
		wantParent                 string
	}{
		{"spawned by a session this node adopted", "n1", "sub-1", "main-1", parent.Id},
		{"its parent adopted by another node", "n2", "sub-2", "main-1", ""},
		{"its parent not adopted", "n1", "sub-3", "main-unknown", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := keep(tc.node, tc.native, tc.parent)
			if got.ParentId != tc.wantParent || got.Subagent != (tc.wantParent != "") {
				t.Fatalf("parent %q subagent %v, want parent %q", got.ParentId, got.Subagent, tc.wantParent)
			}
			if tc.wantParent != "" && got.RootId != parent.Id {
				t.Fatalf("root %q, want %q", got.RootId, parent.Id)
			}
		})
	}
}

// A subagent's run a cast session's own turn started (the node names the
// session it runs) becomes that session's worker, seen by whoever may see
// the session; a session the node does not own, or one gone, leaves the
// run a session of its own.
func TestKeepRunOfACastSessionUnderIt(t *testing.T) {
	s, ctx := twoNodes(t)
	c, err := s.CreateSession(ctx, fence.CreateParams{Agent: "claude", Cwd: "/home/u/p", Node: "n1", Creator: "user:alice"})
	if err != nil {
		t.Fatal(err)
	}
	own := c.Session
	for _, tc := range []struct {
		name, node, parent string
		wantParent         string
	}{
		{"started by a turn this node runs", "n1", own.Id, own.Id},
		{"named by a node that does not own it", "n2", own.Id, ""},
		{"naming a session that is gone", "n1", "zzzzzzz", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			native := "agent-" + tc.node + tc.parent[len(tc.parent)-4:]
			id, _, err := adoption.Keep(ctx, s, adoption.Request{Node: tc.node, Principal: "node:" + tc.node,
				Origin: &castv1.SessionOrigin{Node: tc.node, Agent: "claude", NativeId: native, Path: "/home/u/.claude/projects/p/x/subagents/" + native + ".jsonl"},
				Cwd:    "/home/u/p", Title: native, History: 1, ParentSessionID: tc.parent, ParentCallID: "toolu_9",
				Messages: []*castv1.Message{msg(castv1.MessageKind_MESSAGE_KIND_USER, "task "+native, "adopt."+native+".1")}})
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.GetSession(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if got.ParentId != tc.wantParent || got.Subagent != (tc.wantParent != "") {
				t.Fatalf("parent %q subagent %v, want parent %q", got.ParentId, got.Subagent, tc.wantParent)
			}
			if tc.wantParent != "" && (got.RootId != own.Id || got.Creator != "user:alice" || got.ParentCallId != "toolu_9") {
				t.Fatalf("root %q creator %q call %q, want root %s, the parent's creator and the spawning call", got.RootId, got.Creator, got.ParentCallId, own.Id)
			}
		})
	}
}

// twoNodes is a store on a fresh etcd with nodes n1 and n2 connected.
func twoNodes(t *testing.T) (*store.Store, context.Context) {
	t.Helper()
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	for _, n := range []string{"n1", "n2"} {
		if _, err := s.RegisterNode(ctx, &castv1.Node{Name: n}, "test", 30*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	return s, ctx
}

// A node that lost its bookkeeping (or died between a batch and its
// record) sends again what it kept, read from a file the agent rewrote
// since with other metadata (Gemini's resume writes its records again
// under other ids): each message it kept stays as kept, once, and the
// rest of the batch is stored.
func TestKeepResentMessageWithOtherMetadata(t *testing.T) {
	s, ctx := twoNodes(t)
	origin := &castv1.SessionOrigin{Node: "n1", Agent: "gemini", NativeId: "nat-g", Path: "/home/u/.gemini/tmp/p/chats/session-g.jsonl"}
	hello := msg(castv1.MessageKind_MESSAGE_KIND_USER, "hello", "adopt.a.1")
	hello.NativeId = "rec-1"
	id, _, err := adoption.Keep(ctx, s, adoption.Request{Node: "n1", Principal: "node:n1", Origin: origin, Cwd: "/home/u/p", Title: "hello", History: 1,
		Messages: []*castv1.Message{hello}})
	if err != nil {
		t.Fatal(err)
	}
	again := msg(castv1.MessageKind_MESSAGE_KIND_USER, "hello", "adopt.a.1")
	again.NativeId = "rec-1-resumed"
	answer := msg(castv1.MessageKind_MESSAGE_KIND_ASSISTANT, "hi", "adopt.b.1")
	got, _, err := adoption.Keep(ctx, s, adoption.Request{Node: "n1", Principal: "node:n1", Origin: origin, Cwd: "/home/u/p", Title: "hello", History: 2,
		Messages: []*castv1.Message{again, answer}})
	if err != nil || got != id {
		t.Fatalf("the resent batch: session %q (first %q), %v", got, id, err)
	}
	msgs, _, err := s.ListMessages(ctx, id, 0, 0, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, m := range msgs {
		texts = append(texts, m.Text+" "+m.NativeId)
	}
	if len(texts) != 2 || texts[0] != "hello rec-1" || texts[1] != "hi " {
		t.Fatalf("stored %q; want hello as first kept, then hi", texts)
	}
}
