package web_test

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/metrics"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
	"github.com/cast-dev/cast/internal/web"
)

// Logins over the real store (an embedded etcd): codes work once and
// within their minute, sessions until their end, an OIDC one until its ID
// token's, and not after sign-out. The clock is moved past the lifetimes
// (the leases would lapse later: Logins checks each grant's own end).

func TestLogins(t *testing.T) {
	ep := testharness.StartEtcd(t, nil)
	st, err := store.Open(context.Background(), []string{ep}, store.Access{}, store.DefaultConfig(), metrics.NewStore(nil), zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	alice := authz.Principal{Role: authz.User, Name: "alice", Cred: "c1"}
	for _, tc := range []struct {
		name      string
		wait      time.Duration // after the code is made
		until     time.Duration // an OIDC session's end (0: none)
		afterSign time.Duration // after signing in
		exchanged bool
		live      bool
	}{
		{name: "fresh", exchanged: true, live: true},
		{name: "code expired", wait: 61 * time.Second},
		{name: "session over", afterSign: 12*time.Hour + time.Second, exchanged: true},
		{name: "ID token lapsed first", until: time.Hour, afterSign: time.Hour + time.Second, exchanged: true},
		{name: "ID token still good", until: time.Hour, afterSign: 59 * time.Minute, exchanged: true, live: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Unix(1_800_000_000, 0)
			l := web.NewLogins(st, web.DefaultCodeTTL, web.DefaultSessionTTL)
			l.SetClock(func() time.Time { return now })
			code, _, err := l.NewCode(ctx, alice)
			if err != nil {
				t.Fatal(err)
			}
			now = now.Add(tc.wait)
			var sid string
			if tc.until != 0 {
				sid, err = l.Grant(ctx, alice, now.Add(tc.until))
			} else {
				var ok bool
				sid, _, ok, err = l.Exchange(ctx, code)
				if ok != tc.exchanged {
					t.Fatalf("exchanged %v, want %v", ok, tc.exchanged)
				}
				if _, _, again, _ := l.Exchange(ctx, code); again {
					t.Fatal("a code worked twice")
				}
			}
			if err != nil || !tc.exchanged {
				return
			}
			now = now.Add(tc.afterSign)
			p, live, err := l.Session(ctx, sid)
			if err != nil || live != tc.live || (live && p != alice) {
				t.Fatalf("session: %v %v %v; want live %v", p, live, err, tc.live)
			}
			if live {
				if err := l.End(ctx, sid); err != nil {
					t.Fatal(err)
				}
				if _, still, _ := l.Session(ctx, sid); still {
					t.Fatal("a signed-out session is still live")
				}
			}
		})
	}
}
