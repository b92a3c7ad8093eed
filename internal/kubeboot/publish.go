package kubeboot

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/kube"
	"github.com/cast-dev/cast/internal/tick"
)

// Source is what the publisher reads from the control plane.
type Source interface {
	// CABundle is the PEM bundle of the CAs clients trust and the pin of
	// the one that signs now (nil and "" before TLS is up).
	CABundle() (bundlePEM []byte, pin string)
	// NewJoinToken stores a join token good for uses joins until ttl ends.
	NewJoinToken(ctx context.Context, ttl time.Duration, uses int) (string, error)
	// JoinTokenUses is how many joins a join token has left (0 once it
	// is used up, expired or revoked).
	JoinTokenUses(ctx context.Context, token string) (int, error)
}

// PublishConfig tunes the publisher.
type PublishConfig struct {
	Every    time.Duration // how often the objects are checked
	TokenTTL time.Duration // a published join token's lifetime
	// RenewBefore: a token with less than this left is replaced, so a
	// pod replaced at any time finds one valid for at least this long.
	RenewBefore time.Duration
	Uses        int // joins one token allows (every node pod joins once per pod)
	// RenewUnder: a token with fewer joins left is replaced (pods that
	// churn may use one up before its time).
	RenewUnder int
}

// DefaultPublishConfig renews a 7-day token with 3 days left.
func DefaultPublishConfig() PublishConfig {
	return PublishConfig{Every: time.Minute, TokenTTL: 7 * 24 * time.Hour, RenewBefore: 3 * 24 * time.Hour, Uses: 1000, RenewUnder: 250}
}

// Validate checks c.
func (c PublishConfig) Validate() error {
	if c.Every <= 0 || c.TokenTTL <= 0 || c.Uses < 1 {
		return fmt.Errorf("publish: every, token TTL and uses must be positive")
	}
	if c.RenewUnder < 1 || c.RenewUnder > c.Uses {
		return fmt.Errorf("publish: renew-under %d must lie between 1 and the uses %d", c.RenewUnder, c.Uses)
	}
	if c.RenewBefore < c.Every || c.RenewBefore >= c.TokenTTL {
		return fmt.Errorf("publish: renew-before %s must lie between the check interval %s and the token TTL %s", c.RenewBefore, c.Every, c.TokenTTL)
	}
	return nil
}

// Publisher keeps cast-ca and cast-node-join current. Every replica runs
// one: updates carry the resourceVersion read, so of two replicas
// renewing at once one wins and the other finds the fresh token.
type Publisher struct {
	api Objects
	cfg PublishConfig
	lg  *zap.Logger
	now func() time.Time
}

// NewPublisher makes a Publisher writing through api.
func NewPublisher(api Objects, cfg PublishConfig, lg *zap.Logger) (*Publisher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Publisher{api: api, cfg: cfg, lg: lg.Named("kube-publish"), now: time.Now}, nil
}

// Run publishes at once and then every cfg.Every until ctx ends; a
// failed round is logged and tried again at the next.
func (p *Publisher) Run(ctx context.Context, src Source) {
	tick.Loop{Every: p.cfg.Every, First: true}.Run(ctx, func() bool {
		if err := p.Once(ctx, src); err != nil && ctx.Err() == nil {
			p.lg.Warn("publishing to kubernetes failed; retrying", zap.String("namespace", p.api.Namespace()), zap.Error(err))
		}
		return true
	})
}

// Once brings both objects up to date.
func (p *Publisher) Once(ctx context.Context, src Source) error {
	bundle, pin := src.CABundle()
	if pin == "" {
		return fmt.Errorf("no TLS CA yet")
	}
	if err := p.publishCA(ctx, bundle); err != nil {
		return fmt.Errorf("configmap %s: %w", CAConfigMap, err)
	}
	if err := p.publishJoin(ctx, src, pin); err != nil {
		return fmt.Errorf("secret %s: %w", JoinSecret, err)
	}
	return nil
}

func (p *Publisher) publishCA(ctx context.Context, bundle []byte) error {
	want := map[string]string{KeyCABundle: string(bundle)}
	return p.put(ctx, kube.ConfigMaps, CAConfigMap, func(cur kube.Object, _ bool) (map[string]string, error) {
		if bytes.Equal([]byte(cur.Data[KeyCABundle]), bundle) {
			return nil, nil
		}
		return want, nil
	})
}

func (p *Publisher) publishJoin(ctx context.Context, src Source, pin string) error {
	return p.put(ctx, kube.Secrets, JoinSecret, func(cur kube.Object, exists bool) (map[string]string, error) {
		current, err := p.joinCurrent(ctx, src, cur, exists, pin)
		if err != nil || current {
			return nil, err
		}
		tok, err := src.NewJoinToken(ctx, p.cfg.TokenTTL, p.cfg.Uses)
		if err != nil {
			return nil, err
		}
		exp := p.now().Add(p.cfg.TokenTTL).UTC().Truncate(time.Second)
		p.lg.Info("publishing a join token", zap.String("secret", JoinSecret), zap.Time("expires", exp), zap.String("ca_pin", pin))
		return map[string]string{KeyJoinToken: tok, KeyCAPin: pin, KeyExpires: exp.Format(time.RFC3339)}, nil
	})
}

// joinCurrent reports whether the published Secret cur may stay: it names
// the signing CA, and its token has time and joins enough left.
func (p *Publisher) joinCurrent(ctx context.Context, src Source, cur kube.Object, exists bool, pin string) (bool, error) {
	tok := cur.Data[KeyJoinToken]
	exp, err := time.Parse(time.RFC3339, cur.Data[KeyExpires])
	if !exists || err != nil || cur.Data[KeyCAPin] != pin || tok == "" || !p.now().Add(p.cfg.RenewBefore).Before(exp) {
		return false, nil
	}
	left, err := src.JoinTokenUses(ctx, tok)
	if err != nil {
		return false, err
	}
	return left >= p.cfg.RenewUnder, nil
}

// put reads kind/name and writes decide's data when it returns some:
// created if absent, else updated at the version read. A lost race (the
// object created or changed meanwhile) reads again and decides again.
func (p *Publisher) put(ctx context.Context, kind kube.Kind, name string, decide func(cur kube.Object, exists bool) (map[string]string, error)) error {
	for range 5 {
		cur, err := p.api.Get(ctx, kind, name)
		exists := err == nil
		if err != nil && !kube.Is(err, errs.KindNotFound) {
			return err
		}
		data, err := decide(cur, exists)
		if err != nil || data == nil {
			return err
		}
		obj := kube.Object{Name: name, Labels: maps.Clone(managedBy), Data: data}
		if exists {
			obj.ResourceVersion = cur.ResourceVersion
			_, err = p.api.Update(ctx, kind, obj)
		} else {
			_, err = p.api.Create(ctx, kind, obj)
		}
		if !kube.Is(err, errs.KindAborted) && !kube.Is(err, errs.KindAlreadyExists) {
			return err
		}
	}
	return fmt.Errorf("%s %s kept changing under five writes", kind, name)
}
