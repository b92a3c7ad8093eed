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
	admin, user, node := &Principal{Admin, "root"}, &Principal{User, "alice"}, &Principal{Node, "n1"}
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
	}{{"Bearer abc", "abc", true}, {"bearer abc", "abc", true}, {"Basic abc", "", false}, {"Bearer ", "", false}, {"abc", "", false}} {
		got, err := ParseBearer(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseBearer(%q) = %q, %v", tc.in, got, err)
		}
	}
}

func TestLimiter(t *testing.T) {
	alice0 := Principal{User, "alice"}
	lm := NewLimiter(Limits{Rate: 0.001, Burst: 2, Streams: 1, AppendBytes: 0.001, AppendBurst: 100})
	if err := lm.AllowAppend(alice0, 80); err != nil {
		t.Fatalf("80 bytes within a 100-byte burst: %v", err)
	}
	if err := lm.AllowAppend(alice0, 30); !errs.HasReason(err, ReasonAppendLimited) {
		t.Errorf("past the byte burst: %v", err)
	}
	if err := lm.AllowAppend(Principal{Node, "n1"}, 1000); err != nil {
		t.Errorf("nodes are not limited: %v", err)
	}
	alice, bob, node := Principal{User, "alice"}, Principal{User, "bob"}, Principal{Node, "n1"}
	for i := range 2 {
		if err := lm.Allow(alice); err != nil {
			t.Fatalf("request %d within the burst: %v", i, err)
		}
	}
	if err := lm.Allow(alice); !errs.HasReason(err, ReasonRateLimited) {
		t.Errorf("over the burst: %v", err)
	}
	if err := lm.Allow(bob); err != nil {
		t.Errorf("bob pays for alice: %v", err)
	}
	for range 10 {
		if err := lm.Allow(node); err != nil {
			t.Fatalf("nodes are not limited: %v", err)
		}
	}
	release, err := lm.OpenStream(alice)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lm.OpenStream(alice); !errs.HasReason(err, ReasonTooManyStreams) {
		t.Errorf("second stream: %v", err)
	}
	release()
	release() // twice is once
	if r, err := lm.OpenStream(alice); err != nil {
		t.Errorf("after release: %v", err)
	} else {
		r()
	}
	if len(lm.streams) != 0 {
		t.Errorf("stream counts left: %v", lm.streams)
	}
}
