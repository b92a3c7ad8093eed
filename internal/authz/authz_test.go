package authz

import (
	"testing"

	"github.com/cast-dev/cast/internal/errs"
)

func TestAllow(t *testing.T) {
	pol := Policy{
		"/s/Open":  {Public: true},
		"/s/Admin": {Roles: []Role{Admin}},
		"/s/Any":   {Roles: []Role{Admin, User, Node}},
	}
	admin, user, node := &Principal{Role: Admin, Name: "root"}, &Principal{Role: User, Name: "alice"}, &Principal{Role: Node, Name: "n1"}
	for _, tc := range []struct {
		method string
		p      *Principal
		kind   errs.Kind // 0 (KindInternal) with ok
		ok     bool
	}{
		{"/s/Open", nil, 0, true},
		{"/s/Admin", admin, 0, true},
		{"/s/Admin", user, errs.KindPermissionDenied, false},
		{"/s/Admin", node, errs.KindPermissionDenied, false},
		{"/s/Admin", nil, errs.KindUnauthenticated, false},
		{"/s/Any", node, 0, true},
		{"/s/Missing", admin, errs.KindPermissionDenied, false}, // no rule: closed
	} {
		err := pol.Allow(tc.method, tc.p)
		if tc.ok != (err == nil) {
			t.Errorf("%s as %v: err %v, want ok=%v", tc.method, tc.p, err, tc.ok)
			continue
		}
		if err != nil {
			if e, _ := errs.As(err); e.Kind != tc.kind {
				t.Errorf("%s as %v: kind %v, want %v", tc.method, tc.p, e.Kind, tc.kind)
			}
		}
	}
}

func TestTokens(t *testing.T) {
	a, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewToken()
	if a == b || len(a) != len(TokenPrefix)+64 || Hash(a) == Hash(b) || Hash(a) != Hash(a) {
		t.Fatalf("tokens %q %q", a, b)
	}
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{{"Bearer abc", "abc", true}, {"bearer abc", "abc", true}, {"Basic abc", "", false}, {"Bearer ", "", false}, {"abc", "", false},
		// Only blanks after the scheme is no token: refused as malformed,
		// not looked up (and reported unknown or revoked).
		{"Bearer   ", "", false}, {"Bearer \t", "", false}} {
		got, err := ParseBearer(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseBearer(%q) = %q, %v", tc.in, got, err)
		}
	}
}

// Users and nodes are each held to their own limits, per principal: one
// over its limit holds back no other, a user and a node of the same name
// share nothing, and admins are not limited.
func TestLimiter(t *testing.T) {
	tight := Limits{Rate: 0.001, Burst: 2, Streams: 1, AppendBytes: 0.001, AppendBurst: 100}
	for _, role := range []Role{User, Node} {
		t.Run(string(role), func(t *testing.T) {
			users, nodes := DefaultLimits(), DefaultNodeLimits()
			if role == User {
				users = tight
			} else {
				nodes = tight
			}
			lm := NewLimiter(users, nodes, DefaultPeerLimits())
			a, b := Principal{Role: role, Name: "a"}, Principal{Role: role, Name: "b"}
			other := Principal{Role: User, Name: "a"} // the same name in the other role
			if role == User {
				other = Principal{Role: Node, Name: "a"}
			}
			admin := Principal{Role: Admin, Name: "root"}
			if err := lm.AllowAppend(a, 80); err != nil {
				t.Fatalf("80 bytes within a 100-byte burst: %v", err)
			}
			if err := lm.AllowAppend(a, 30); !errs.HasReason(err, ReasonAppendLimited) {
				t.Errorf("past the byte burst: %v", err)
			}
			for _, p := range []Principal{b, other, admin} {
				if err := lm.AllowAppend(p, 100); err != nil {
					t.Errorf("%s pays for %s's bytes: %v", p, a, err)
				}
			}
			for i := range 2 {
				if err := lm.Allow(a); err != nil {
					t.Fatalf("request %d within the burst: %v", i, err)
				}
			}
			if err := lm.Allow(a); !errs.HasReason(err, ReasonRateLimited) {
				t.Errorf("over the burst: %v", err)
			}
			for _, p := range []Principal{b, other, admin, admin, admin} {
				if err := lm.Allow(p); err != nil {
					t.Errorf("%s pays for %s's requests: %v", p, a, err)
				}
			}
			release, err := lm.OpenStream(a)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := lm.OpenStream(a); !errs.HasReason(err, ReasonTooManyStreams) {
				t.Errorf("second stream: %v", err)
			}
			for _, p := range []Principal{b, other, admin, admin} {
				r, err := lm.OpenStream(p)
				if err != nil {
					t.Fatalf("%s pays for %s's streams: %v", p, a, err)
				}
				defer r()
			}
			release()
			release() // twice is once
			if r, err := lm.OpenStream(a); err != nil {
				t.Errorf("after release: %v", err)
			} else {
				r()
			}
		})
	}
}
