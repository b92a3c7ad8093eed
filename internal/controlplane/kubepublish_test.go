package controlplane_test

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/kube"
	"github.com/cast-dev/cast/internal/kube/kubetest"
	"github.com/cast-dev/cast/internal/kubeboot"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/testharness"
)

// A control plane with --publish-k8s, under the Role the install grants
// it, publishes its CA bundle and a join token with its pin; a node
// given nothing but that Secret's values (as the DaemonSet's env does)
// joins. A CA rotation reaches both: the bundle once the next CA is
// trusted, the pin once it signs.
func TestPublishK8sJoinsNodes(t *testing.T) {
	t.Parallel()
	api := kubetest.New(t, "cast", kubetest.RoleRules(t, "../../deploy/k8s/base/rbac.yaml", "cast-controlplane"))
	kc := api.Client(t)
	pcfg := kubeboot.DefaultPublishConfig()
	pcfg.Every = 100 * time.Millisecond // a rotation shows within a round
	pub, err := kubeboot.NewPublisher(kc, pcfg, zaptest.NewLogger(t))
	must(t, err)
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) { c.TLS.Enabled, c.Publish = true, pub })
	ctx := ctxT(t)
	read := func(kind kube.Kind, name string) map[string]string {
		o, err := kc.Get(ctx, kind, name)
		if err != nil {
			return nil
		}
		return o.Data
	}
	testharness.WaitFor(t, 20*time.Second, "cast-node-join", func() bool { return read(kube.Secrets, kubeboot.JoinSecret) != nil })
	join := read(kube.Secrets, kubeboot.JoinSecret)
	if join[kubeboot.KeyCAPin] != srv.CAPin() {
		t.Fatalf("published pin %q, the control plane's %q", join[kubeboot.KeyCAPin], srv.CAPin())
	}
	bundlePins := func() []string {
		cas, err := pki.ParseBundle([]byte(read(kube.ConfigMaps, kubeboot.CAConfigMap)[kubeboot.KeyCABundle]))
		if err != nil {
			return nil
		}
		var pins []string
		for _, c := range cas {
			pins = append(pins, pki.Pin(c))
		}
		return pins
	}
	if pins := bundlePins(); !slices.Equal(pins, []string{srv.CAPin()}) {
		t.Fatalf("cast-ca holds %v, want the CA %s", pins, srv.CAPin())
	}

	testharness.StartNode(t, srv.Addr(), "k8s-node", func(c *node.Config) {
		c.CAPin, c.JoinToken, c.DataDir = join[kubeboot.KeyCAPin], join[kubeboot.KeyJoinToken], filepath.Join(t.TempDir(), "k8s-node")
	})
	admin, err := client.Context{Addr: srv.Addr(), CAPin: srv.CAPin(), Token: testharness.AdminToken()}.Dial()
	must(t, err)
	defer admin.Close()
	waitConnected(t, admin, "k8s-node", true)
	if left, err := srv.JoinTokenUses(ctx, join[kubeboot.KeyJoinToken]); err != nil || left != pcfg.Uses-1 {
		t.Errorf("the published token has %d joins left (%v) after one join; want %d", left, err, pcfg.Uses-1)
	}
	if left, err := srv.JoinTokenUses(ctx, "cast_unknown"); err != nil || left != 0 {
		t.Errorf("an unknown token has %d joins left (%v)", left, err)
	}

	oldPin := srv.CAPin()
	rot, err := admin.Auth.RotateCA(ctx, &castv1.RotateCARequest{})
	must(t, err)
	testharness.WaitFor(t, 20*time.Second, "cast-ca to hold both CAs", func() bool {
		return slices.Equal(bundlePins(), []string{oldPin, rot.Next.Pin})
	})
	_, err = admin.Auth.ActivateCA(ctx, &castv1.ActivateCARequest{Force: true})
	must(t, err)
	testharness.WaitFor(t, 20*time.Second, "cast-node-join to carry the new pin", func() bool {
		return read(kube.Secrets, kubeboot.JoinSecret)[kubeboot.KeyCAPin] == rot.Next.Pin
	})
	if tok := read(kube.Secrets, kubeboot.JoinSecret)[kubeboot.KeyJoinToken]; tok == join[kubeboot.KeyJoinToken] {
		t.Error("the join token was not replaced with the pin")
	}
}

// --publish-k8s publishes a pin: it is refused without TLS.
func TestPublishK8sNeedsTLS(t *testing.T) {
	t.Parallel()
	cfg := testharness.ControlPlaneConfig(t)
	pub, err := kubeboot.NewPublisher(kubetest.New(t, "cast", nil).Client(t), kubeboot.DefaultPublishConfig(), zaptest.NewLogger(t))
	must(t, err)
	cfg.TLS.Enabled, cfg.Insecure, cfg.Publish = false, true, pub
	if err := cfg.Validate(); err == nil {
		t.Fatal("Validate passed --publish-k8s with --insecure")
	}
}
