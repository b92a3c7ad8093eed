package kubeboot_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/cast-dev/cast/internal/kube"
	"github.com/cast-dev/cast/internal/kube/kubetest"
	"github.com/cast-dev/cast/internal/kubeboot"
)

// source is a control plane as the publisher sees it: a bundle, a pin
// and join tokens it counts.
type source struct {
	mu          sync.Mutex
	bundle, pin string
	minted      []string
	left        map[string]int // joins left per token
}

func (s *source) CABundle() ([]byte, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return []byte(s.bundle), s.pin
}

func (s *source) NewJoinToken(_ context.Context, ttl time.Duration, uses int) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tok := fmt.Sprintf("cast_tok%d_ttl%s_uses%d", len(s.minted), ttl, uses)
	s.minted = append(s.minted, tok)
	if s.left == nil {
		s.left = map[string]int{}
	}
	s.left[tok] = uses
	return tok, nil
}

func (s *source) JoinTokenUses(_ context.Context, tok string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.left[tok], nil
}

// spend takes n joins of the newest token, as node pods joining would.
func (s *source) spend(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.left[s.minted[len(s.minted)-1]] -= n
}

func (s *source) set(bundle, pin string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bundle, s.pin = bundle, pin
}

func writes(calls []string) []string {
	return slices.DeleteFunc(slices.Clone(calls), func(c string) bool { return strings.HasPrefix(c, "get ") })
}

// Under the control plane's Role, the publisher writes cast-ca and
// cast-node-join, then leaves them alone while they are current; it
// renews the token once less than RenewBefore is left or pods used all
// but RenewUnder of its joins, republishes the pin after a CA change, and
// the bundle when it changes.
func TestPublisherWithinRole(t *testing.T) {
	srv := kubetest.New(t, "cast", kubetest.RoleRules(t, rbac, "cast-controlplane"))
	api := srv.Client(t)
	cfg := kubeboot.DefaultPublishConfig()
	p, err := kubeboot.NewPublisher(api, cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p.SetNow(func() time.Time { return now })
	src := &source{bundle: "BUNDLE-1", pin: "sha256:one"}
	ctx := ctxT(t)
	secret := func() map[string]string {
		o, err := api.Get(ctx, kube.Secrets, kubeboot.JoinSecret)
		if err != nil {
			t.Fatal(err)
		}
		return o.Data
	}
	steps := []struct {
		name       string
		do         func()
		wantWrites []string
		wantToken  int // index of the minted token the Secret holds
		wantPin    string
	}{
		{"first", func() {}, []string{"create configmaps/cast-ca", "create secrets/cast-node-join"}, 0, "sha256:one"},
		{"current", func() { now = now.Add(cfg.TokenTTL - cfg.RenewBefore - time.Minute) }, nil, 0, "sha256:one"},
		{"near its end", func() { now = now.Add(2 * time.Minute) }, []string{"update secrets/cast-node-join"}, 1, "sha256:one"},
		{"new CA pin", func() { src.set("BUNDLE-1", "sha256:two") }, []string{"update secrets/cast-node-join"}, 2, "sha256:two"},
		{"new bundle", func() { src.set("BUNDLE-2", "sha256:two") }, []string{"update configmaps/cast-ca"}, 2, "sha256:two"},
		{"joins left", func() { src.spend(cfg.Uses - cfg.RenewUnder) }, nil, 2, "sha256:two"},
		{"used up early", func() { src.spend(1) }, []string{"update secrets/cast-node-join"}, 3, "sha256:two"},
	}
	for _, st := range steps {
		st.do()
		before := len(srv.Calls())
		if err := p.Once(ctx, src); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if got := writes(srv.Calls()[before:]); !slices.Equal(got, st.wantWrites) {
			t.Errorf("%s: wrote %v, want %v", st.name, got, st.wantWrites)
		}
		d := secret()
		if d[kubeboot.KeyJoinToken] != src.minted[st.wantToken] || d[kubeboot.KeyCAPin] != st.wantPin ||
			d[kubeboot.KeyExpires] == "" {
			t.Errorf("%s: the Secret holds %v; want token %d of %v and pin %s", st.name, d, st.wantToken, src.minted, st.wantPin)
		}
	}
	if cm, err := api.Get(ctx, kube.ConfigMaps, kubeboot.CAConfigMap); err != nil || cm.Data[kubeboot.KeyCABundle] != "BUNDLE-2" {
		t.Errorf("cast-ca: %v %v", cm, err)
	}
	if len(src.minted) != 4 || !strings.Contains(src.minted[0], "_ttl168h0m0s_uses1000") {
		t.Errorf("minted %v; want four 7-day tokens of 1000 uses", src.minted)
	}
}

// Three replicas publishing at once end with one token, which every one
// of them then keeps: a lost create or update reads again and finds the
// winner's token current.
func TestPublishersRace(t *testing.T) {
	srv := kubetest.New(t, "cast", nil)
	src := &source{bundle: "B", pin: "sha256:p"}
	ctx := ctxT(t)
	var ps []*kubeboot.Publisher
	for range 3 {
		p, err := kubeboot.NewPublisher(srv.Client(t), kubeboot.DefaultPublishConfig(), zaptest.NewLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	var wg sync.WaitGroup
	errc := make(chan error, len(ps))
	for _, p := range ps {
		wg.Go(func() { errc <- p.Once(ctx, src) })
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatal(err)
		}
	}
	sec, err := srv.Client(t).Get(ctx, kube.Secrets, kubeboot.JoinSecret)
	if err != nil || !slices.Contains(src.minted, sec.Data[kubeboot.KeyJoinToken]) {
		t.Fatalf("the Secret %v %v holds none of the minted %v", sec, err, src.minted)
	}
	before := len(srv.Calls())
	for _, p := range ps {
		if err := p.Once(ctx, src); err != nil {
			t.Fatal(err)
		}
	}
	if w := writes(srv.Calls()[before:]); len(w) != 0 {
		t.Errorf("after the race, replicas still wrote %v", w)
	}
	if n := strings.Count(strings.Join(srv.Calls(), "\n"), "create secrets/cast-node-join"); n < 1 || len(writes(srv.Calls())) > 2*len(ps) {
		t.Errorf("calls %v", srv.Calls())
	}
}

func TestPublishConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*kubeboot.PublishConfig)
	}{
		{"renew before the TTL itself", func(c *kubeboot.PublishConfig) { c.RenewBefore = c.TokenTTL }},
		{"renew within one check", func(c *kubeboot.PublishConfig) { c.RenewBefore = c.Every / 2 }},
		{"no uses", func(c *kubeboot.PublishConfig) { c.Uses = 0 }},
		{"renew under more than the uses", func(c *kubeboot.PublishConfig) { c.RenewUnder = c.Uses + 1 }},
		{"never renew for uses", func(c *kubeboot.PublishConfig) { c.RenewUnder = 0 }},
	} {
		c := kubeboot.DefaultPublishConfig()
		tc.edit(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: Validate passed", tc.name)
		}
	}
	if err := kubeboot.DefaultPublishConfig().Validate(); err != nil {
		t.Error(err)
	}
}
