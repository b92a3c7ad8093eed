package store_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// Small limits so a few messages exercise what ten 8 MiB tool outputs do
// at the defaults (internal/controlplane's TestLargeSessionIsReadWhole).
const (
	pgChunk   = 4 << 10
	pgMaxMsg  = 48 << 10
	pgPageCap = 64 << 10
)

func smallPages(c *store.Config) {
	c.ChunkBytes, c.MaxMessageBytes, c.PageBytes = pgChunk, pgMaxMsg, pgPageCap
	c.MaxBatchBytes = pgMaxMsg + 1024
}

// pageBytes is what a page's messages weigh in a reply.
func pageBytes(msgs []*castv1.Message) int {
	return proto.Size(&castv1.ListMessagesResponse{Messages: msgs})
}

func TestPagesAreBoundedInBytes(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), smallPages)
	c := newSession(t, s, "n1")
	ctx := ctxT(t)
	// Sizes around the budget: small rows, rows near the max, a run of
	// max-size rows (one per page), and small rows again.
	sizes := []int{100, 30 << 10, 30 << 10, 40 << 10, 45 << 10, 45 << 10, 45 << 10, 10, 20 << 10, 5}
	for range 3 {
		sizes = append(sizes, 1, 2, 3)
	}
	want := map[int64]string{1: ""} // seq 1: the session's creation row, if any
	for i, n := range sizes {
		text := strings.Repeat(string(rune('a'+i%26)), n)
		m := &castv1.Message{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_TOOL_RESULT,
			ToolResult: &castv1.ToolResult{CallId: fmt.Sprint("c", i), Output: text}}
		got, err := s.Append(ctx, c.Session.Id, []*castv1.Message{m}, fence.Guard{})
		if err != nil {
			t.Fatalf("append %d bytes: %v", n, err)
		}
		want[got[0].Seq] = text
	}
	sess, err := s.GetSession(ctx, c.Session.Id)
	if err != nil {
		t.Fatal(err)
	}
	check := func(how string, pages [][]*castv1.Message) {
		t.Helper()
		next := int64(1)
		for _, p := range pages {
			if len(p) == 0 {
				t.Fatalf("%s: empty page", how)
			}
			if len(p) > 1 && pageBytes(p) > pgPageCap {
				t.Fatalf("%s: page of %d messages is %d bytes, over %d", how, len(p), pageBytes(p), pgPageCap)
			}
			for _, m := range p {
				if m.Seq != next {
					t.Fatalf("%s: seq %d, want %d", how, m.Seq, next)
				}
				if w, ok := want[m.Seq]; ok && w != "" && m.ToolResult.GetOutput() != w {
					t.Fatalf("%s: seq %d differs", how, m.Seq)
				}
				next++
			}
		}
		if next != sess.LastSeq+1 {
			t.Fatalf("%s: read up to %d, want %d", how, next-1, sess.LastSeq)
		}
		if len(pages) < 5 {
			t.Fatalf("%s: %d pages; the byte budget did not split them", how, len(pages))
		}
	}
	var pages [][]*castv1.Message
	for tok := ""; ; {
		msgs, next, err := s.ListMessages(ctx, c.Session.Id, 0, 0, 500, tok)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, msgs)
		if tok = next; tok == "" {
			break
		}
	}
	check("list", pages)
	pages = nil
	if err := s.Export(ctx, c.Session.Id, func(_ *castv1.Session, msgs []*castv1.Message) error {
		pages = append(pages, msgs)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	check("export", pages)
	// A range read stops at its end whatever the byte budget.
	msgs, next, err := s.ListMessages(ctx, c.Session.Id, 3, 3, 500, "")
	if err != nil || len(msgs) != 1 || msgs[0].Seq != 3 || next != "" {
		t.Fatalf("range 3:3: %d messages, token %q, %v", len(msgs), next, err)
	}
}

func TestForeignPageTokensAreRefused(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), smallPages)
	ctx := ctxT(t)
	a, b := newSession(t, s, "n1"), newSession(t, s, "n1")
	for range 3 {
		if _, err := s.Append(ctx, a.Session.Id, []*castv1.Message{userMsg(strings.Repeat("x", 40<<10))}, fence.Guard{}); err != nil {
			t.Fatal(err)
		}
	}
	_, tok, err := s.ListMessages(ctx, a.Session.Id, 0, 0, 1, "")
	if err != nil || tok == "" {
		t.Fatalf("first page: token %q, %v", tok, err)
	}
	// The genuine token works.
	if _, _, err := s.ListMessages(ctx, a.Session.Id, 0, 0, 1, tok); err != nil {
		t.Fatalf("genuine token: %v", err)
	}
	forge := func(after string, rev int64, sid string) string {
		return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, `{"a":%q,"r":%d,"s":%q}`, after, rev, sid))
	}
	var genuine struct {
		R int64 `json:"r"`
	}
	raw, _ := base64.RawURLEncoding.DecodeString(tok)
	if err := json.Unmarshal(raw, &genuine); err != nil || genuine.R == 0 {
		t.Fatalf("token %q: %v", raw, err)
	}
	cur := genuine.R
	for _, tc := range []struct {
		name, sid, token string
	}{
		{"future revision", a.Session.Id, forge("2", cur+1000, a.Session.Id)},
		{"seq past the end", a.Session.Id, forge("999", cur, a.Session.Id)},
		{"another session's", b.Session.Id, tok},
		{"before the session", a.Session.Id, forge("1", 1, a.Session.Id)},
		{"garbage", a.Session.Id, "!!"},
		{"zero seq", a.Session.Id, forge("0", cur, a.Session.Id)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.ListMessages(ctx, tc.sid, 0, 0, 1, tc.token)
			if !errs.HasReason(err, errs.ReasonBadPageToken) {
				t.Fatalf("got %v, want %s", err, errs.ReasonBadPageToken)
			}
		})
	}
}
