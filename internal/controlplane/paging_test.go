package controlplane_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
