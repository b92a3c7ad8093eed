package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/fence"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// WatchDispatch reports the user messages appended, inline or chunked, and
// none of the other kinds (nothing is dispatched for them, and every
// replica's watch sees every append): they come in revision order, so the
// last user message arriving means every message before it was passed.
func TestWatchDispatchReportsUserMessagesOnly(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), smallChunks)
	c := newSession(t, s, "n1")
	ctx := ctxT(t)
	rev, err := s.Revision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("y", 4096) // past smallChunks' 1,024 bytes: chunked
	msgs := []*castv1.Message{
		{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "a"},
		userMsg("u1"),
		{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_TOOL_RESULT, Text: big},
		{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: big},
		{ClientId: ids.NewClientID(), Text: "no kind"},
		userMsg(big),
		userMsg("last"),
	}
	for _, m := range msgs {
		if _, err := s.Append(ctx, c.Session.Id, []*castv1.Message{m}, fence.Guard{}); err != nil {
			t.Fatal(err)
		}
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	var got []string
	_ = s.WatchDispatch(wctx, rev+1, func(ch store.Change) {
		if ch.Message == nil {
			return
		}
		if ch.Session != c.Session.Id {
			t.Errorf("message of session %q, want %q", ch.Session, c.Session.Id)
		}
		got = append(got, ch.Message.Kind.String()+" "+ch.Message.Text[:min(len(ch.Message.Text), 4)])
		if ch.Message.Text == "last" {
			stop()
		}
	})
	want := []string{"MESSAGE_KIND_USER u1", "MESSAGE_KIND_USER yyyy", "MESSAGE_KIND_USER last"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("reported %q, want %q", got, want)
	}
}
