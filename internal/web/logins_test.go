package web_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/cast-dev/cast/internal/authz"
	"github.com/cast-dev/cast/internal/controlplane"
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
			var s web.SignIn
			if tc.until != 0 {
				s, err = l.Grant(ctx, alice, now.Add(tc.until))
			} else {
				var ok bool
				s, ok, err = l.Exchange(ctx, code)
				if ok != tc.exchanged {
					t.Fatalf("exchanged %v, want %v", ok, tc.exchanged)
				}
				if _, again, _ := l.Exchange(ctx, code); again {
					t.Fatal("a code worked twice")
				}
			}
			if err != nil || !tc.exchanged {
				return
			}
			now = now.Add(tc.afterSign)
			sid := s.ID
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

// A browser session that asks for a login link (CreateWebLogin through the
// app's API, with its cookie) gets one whose session ends when the asking
// one does: trading each session for a fresh one before it ended would
// keep a browser signed in for ever. The api here stands where the
// control plane's CreateWebLogin does: it makes a code in the call's
// context.
func TestALoginLinkFromABrowserEndsWithIt(t *testing.T) {
	st := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	alice := authz.Principal{Role: authz.User, Name: "alice", Cred: "c1"}
	for _, tc := range []struct {
		name      string
		mint      time.Duration // after the first session began
		exchange  time.Duration // after the code is made
		exchanged bool
	}{
		{name: "made late in the session", mint: 11 * time.Hour, exchanged: true},
		{name: "exchanged after the session ended", mint: 12*time.Hour - 10*time.Second, exchange: 20 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			start := time.Unix(1_800_000_000, 0)
			now := start
			l := web.NewLogins(st, web.DefaultCodeTTL, web.DefaultSessionTTL)
			l.SetClock(func() time.Time { return now })
			firstIn, err := l.Grant(ctx, alice, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			first := firstIn.ID
			api := mintingAPI(t, l, alice)
			now = start.Add(tc.mint)
			req := httptest.NewRequest(http.MethodPost, "/cast.v1.AuthService/CreateWebLogin", nil)
			req.Header.Set("Content-Type", "application/json") // a Connect call: anything else is refused first
			req.AddCookie(&http.Cookie{Name: web.SessionCookie(req.Host, false), Value: first})
			rec := httptest.NewRecorder()
			web.NewHandler(l, api, false, "", controlplane.StatusOf, zaptest.NewLogger(t)).ServeHTTP(rec, req)
			code := rec.Body.String()
			if rec.Code != http.StatusOK || code == "" {
				t.Fatalf("minting through the API: %d %q", rec.Code, code)
			}
			now = now.Add(tc.exchange)
			secondIn, ok, err := l.Exchange(ctx, code)
			if err != nil || ok != tc.exchanged {
				t.Fatalf("exchanged %v (%v), want %v", ok, err, tc.exchanged)
			}
			second := secondIn.ID
			if !ok {
				return
			}
			if _, live, _ := l.Session(ctx, second); !live {
				t.Fatal("the new session is not live")
			}
			now = start.Add(12*time.Hour + time.Second) // the first session is over
			if _, live, _ := l.Session(ctx, first); live {
				t.Fatal("the first session outlived its 12 hours")
			}
			if _, live, _ := l.Session(ctx, second); live {
				t.Fatal("a session signed in with a link its browser session made outlives that session")
			}
		})
	}
}

// failingSessionSave is the real store except that saving a browser
// session fails while fail is set (etcd lost between the code's read and
// the session's write).
type failingSessionSave struct {
	*store.Store
	fail bool
}

func (f *failingSessionSave) PutWebGrant(ctx context.Context, kind, hash string, value []byte, ttl time.Duration) error {
	if f.fail && kind == web.SessionGrants {
		return context.DeadlineExceeded
	}
	return f.Store.PutWebGrant(ctx, kind, hash, value, ttl)
}

// A sign-in whose session could not be saved tells the browser to retry
// (503); the retry must sign it in, so the code must still be usable: a
// code used up by a sign-in that made no session would answer the retry
// "used or expired" (401). It still works once.
func TestFailedSessionSaveLeavesTheCodeUsable(t *testing.T) {
	st := &failingSessionSave{Store: testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)}
	alice := authz.Principal{Role: authz.User, Name: "alice", Cred: "c1"}
	ctx := context.Background()
	l := web.NewLogins(st, web.DefaultCodeTTL, web.DefaultSessionTTL)
	code, _, err := l.NewCode(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	st.fail = true
	if _, ok, err := l.Exchange(ctx, code); err == nil || ok {
		t.Fatalf("a sign-in whose session was not saved: ok %v, err %v; want an error", ok, err)
	}
	st.fail = false
	s, ok, err := l.Exchange(ctx, code)
	if err != nil || !ok || s.P != alice {
		t.Fatalf("the retry: ok %v, %v, err %v; want signed in as %v", ok, s.P, err, alice)
	}
	if _, live, err := l.Session(ctx, s.ID); !live || err != nil {
		t.Fatalf("the retry's session: live %v, err %v", live, err)
	}
	if _, again, err := l.Exchange(ctx, code); again || err != nil {
		t.Fatalf("the code worked again after signing in: %v %v", again, err)
	}
}

// Exchanges of one code at once (two tabs, a double submit) sign in once:
// the session is saved before the code is taken, so every exchange may
// save one, but only the one that takes the code gives its session out.
func TestConcurrentExchangesSignInOnce(t *testing.T) {
	st := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	ctx := context.Background()
	l := web.NewLogins(st, web.DefaultCodeTTL, web.DefaultSessionTTL)
	code, _, err := l.NewCode(ctx, authz.Principal{Role: authz.User, Name: "alice", Cred: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	sids := make(chan string, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, ok, err := l.Exchange(ctx, code)
			if err != nil {
				t.Error(err)
			}
			if ok {
				sids <- s.ID
			}
		}()
	}
	wg.Wait()
	close(sids)
	if len(sids) != 1 {
		t.Fatalf("%d exchanges of one code signed in; want 1", len(sids))
	}
}

// mintingAPI stands where the control plane's CreateWebLogin does: it
// makes a code for p in the call's context and answers it.
func mintingAPI(t *testing.T, l *web.Logins, p authz.Principal) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, _, err := l.NewCode(r.Context(), p)
		if err != nil {
			t.Error(err)
		}
		_, _ = io.WriteString(w, code)
	})
}
