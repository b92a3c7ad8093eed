package controlplane_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/archive"
	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// A page token from the future (a revision the store has not reached, or
// a seq past the session's end) is INVALID_ARGUMENT / INVALID_PAGE_TOKEN,
// not UNAVAILABLE "retry shortly": retrying it can never work.
func TestForgedPageTokenIsInvalid(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	ctx := ctxT(t)
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp", Text: "first"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: sess.Id, Text: "second"}); err != nil {
		t.Fatal(err)
	}
	first, err := c.Sessions.ListMessages(ctx, &castv1.ListMessagesRequest{SessionId: sess.Id, PageSize: 1})
	if err != nil || first.NextPageToken == "" {
		t.Fatalf("first page: %v", err)
	}
	var genuine struct {
		R int64 `json:"r"`
	}
	raw, _ := base64.RawURLEncoding.DecodeString(first.NextPageToken)
	if err := json.Unmarshal(raw, &genuine); err != nil || genuine.R == 0 {
		t.Fatalf("token %q: %v", raw, err)
	}
	forge := func(after string, rev int64) string {
		return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, `{"a":%q,"r":%d,"s":%q}`, after, rev, sess.Id))
	}
	for name, tok := range map[string]string{
		"future revision":  forge("1", 1<<40),
		"seq past the end": forge("99", genuine.R),
	} {
		_, err := c.Sessions.ListMessages(ctx, &castv1.ListMessagesRequest{SessionId: sess.Id, PageToken: tok})
		if status.Code(err) != codes.InvalidArgument || client.ReasonOf(err) != "INVALID_PAGE_TOKEN" {
			t.Errorf("%s: got %v (%s), want INVALID_ARGUMENT / INVALID_PAGE_TOKEN", name, err, client.ReasonOf(err))
		}
	}
}

// The control plane refuses page and message sizes whose replies could
// pass the clients' receive limit.
func TestConfigKeepsRepliesUnderTheReceiveLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		page, msg int
		ok        bool
	}{
		{"defaults", 0, 0, true},
		{"pages of 32 MiB", 32 << 20, 0, true},
		{"pages of the limit", client.MaxReplyBytes, 0, false},
		{"messages of the limit", 0, client.MaxReplyBytes, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testharness.ControlPlaneConfig(t)
			if tc.page > 0 {
				cfg.Store.PageBytes = tc.page
			}
			if tc.msg > 0 {
				cfg.Store.MaxMessageBytes, cfg.MaxRecvBytes = tc.msg, tc.msg
			}
			err := cfg.Validate()
			if tc.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "receive limit")) {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// A ListMessages page token resumes only the range it was handed out for
// (AIP-158: a changed request with an old token is an error). Before, the
// token's seq replaced start_seq: resumed under start_seq 4 it handed out
// seq 2 and 3, outside the range asked, and a token from start_seq 4 put
// under start_seq 1 skipped seq 1..4 without a word.
func TestMessagePageTokenKeepsItsRange(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	ctx := ctxT(t)
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp", Text: "1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"2", "3", "4", "5", "6"} {
		if _, err := c.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: sess.Id, Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	tokenOf := func(start, end int64) string {
		t.Helper()
		p, err := c.Sessions.ListMessages(ctx, &castv1.ListMessagesRequest{SessionId: sess.Id, StartSeq: start, EndSeq: end, PageSize: 1})
		if err != nil || p.NextPageToken == "" {
			t.Fatalf("first page of %d:%d: %v", start, end, err)
		}
		return p.NextPageToken
	}
	for _, tc := range []struct {
		name                 string
		from, to, start, end int64
	}{
		{"resumed under a later start", 1, 0, 4, 0},
		{"resumed under an earlier start", 4, 0, 1, 0},
		{"resumed under another end", 1, 6, 1, 3},
	} {
		tok := tokenOf(tc.from, tc.to)
		p, err := c.Sessions.ListMessages(ctx, &castv1.ListMessagesRequest{SessionId: sess.Id, StartSeq: tc.start, EndSeq: tc.end, PageToken: tok})
		if status.Code(err) != codes.InvalidArgument || client.ReasonOf(err) != "INVALID_PAGE_TOKEN" {
			var seqs []int64
			for _, m := range p.GetMessages() {
				seqs = append(seqs, m.Seq)
			}
			t.Errorf("%s: got seqs %v, %v (%s), want INVALID_ARGUMENT / INVALID_PAGE_TOKEN", tc.name, seqs, err, client.ReasonOf(err))
		}
	}
	// The same range pages on, page size changed or not.
	tok := tokenOf(2, 5)
	p, err := c.Sessions.ListMessages(ctx, &castv1.ListMessagesRequest{SessionId: sess.Id, StartSeq: 2, EndSeq: 5, PageSize: 10, PageToken: tok})
	if err != nil || len(p.Messages) != 3 || p.Messages[0].Seq != 3 || p.NextPageToken != "" {
		t.Fatalf("second page of 2:5: %v %v", p, err)
	}
}

// A purged session's messages stay readable at an older store revision
// until a compaction, and a page token names that revision and the
// session: another user forging one (tokens are base64 JSON) must not
// read the purged session through it. The session check passes a session
// it cannot find (the handler says NOT_FOUND), so before, the handler read
// alice's purged messages for bob at the token's revision. Now bob gets
// NOT_FOUND, as for a session never made.
func TestPurgedSessionIsNotReadThroughAForgedToken(t *testing.T) {
	t.Parallel()
	e := newAuthEnv(t, nil)
	ctx := ctxT(t)
	id := e.aliceSess.Id
	for _, text := range []string{"secret one", "secret two"} {
		if _, err := e.alice.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: id, Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	// Bob learns a current revision from a token of his own.
	mine, err := e.bob.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp", Text: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.bob.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: mine.Id, Text: "2"}); err != nil {
		t.Fatal(err)
	}
	p, err := e.bob.Sessions.ListMessages(ctx, &castv1.ListMessagesRequest{SessionId: mine.Id, PageSize: 1})
	if err != nil || p.NextPageToken == "" {
		t.Fatalf("bob's own page: %v", err)
	}
	var own struct {
		R int64  `json:"r"`
		Q string `json:"q"`
	}
	raw, _ := base64.RawURLEncoding.DecodeString(p.NextPageToken)
	if err := json.Unmarshal(raw, &own); err != nil || own.R == 0 {
		t.Fatalf("token %q: %v", raw, err)
	}
	// Alice watches it while it is purged: the fan-out holds its frames.
	w, err := e.alice.Sessions.WatchSession(ctx, &castv1.WatchSessionRequest{SessionId: id, StartSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Recv(); err != nil {
		t.Fatal(err)
	}
	testharness.WaitFor(t, 30*time.Second, "alice's turns to end", func() bool {
		s, err := e.alice.Sessions.GetSession(ctx, &castv1.GetSessionRequest{SessionId: id})
		return err == nil && archive.Purgeable(s) == nil
	})
	if _, err := e.alice.Sessions.DeleteSession(ctx, &castv1.DeleteSessionRequest{SessionId: id, Purge: true}); err != nil {
		t.Fatal(err)
	}
	forged := base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, `{"a":"1","r":%d,"s":%q,"q":%q}`, own.R, id, own.Q))
	got, err := e.bob.Sessions.ListMessages(ctx, &castv1.ListMessagesRequest{SessionId: id, PageToken: forged})
	if status.Code(err) != codes.NotFound || len(got.GetMessages()) > 0 { // as for a session never made
		var texts []string
		for _, m := range got.GetMessages() {
			texts = append(texts, m.GetText())
		}
		t.Fatalf("bob read alice's purged session: %q, %v", texts, err)
	}
	bw, err := e.bob.Sessions.WatchSession(ctx, &castv1.WatchSessionRequest{SessionId: id, StartSeq: 1})
	if err == nil {
		var ev *castv1.WatchSessionResponse
		ev, err = bw.Recv()
		if err == nil {
			t.Fatalf("bob watched alice's purged session: %v", ev)
		}
	}
	if status.Code(err) != codes.NotFound {
		t.Errorf("bob's watch of alice's purged session: %v, want NOT_FOUND", err)
	}
}
