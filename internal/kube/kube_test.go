package kube_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/cast-dev/cast/internal/errs"
	"github.com/cast-dev/cast/internal/kube"
	"github.com/cast-dev/cast/internal/kube/kubetest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Get, Create and Update follow the API's semantics: NotFound, create
// once (AlreadyExists after), update at the version read (Conflict when
// another wrote since), a Secret's data base64 on the wire and plain in
// an Object.
func TestClientObjects(t *testing.T) {
	srv := kubetest.New(t, "cast", nil)
	c := srv.Client(t)
	ctx := ctxT(t)
	for _, kind := range []kube.Kind{kube.Secrets, kube.ConfigMaps} {
		t.Run(string(kind), func(t *testing.T) {
			if _, err := c.Get(ctx, kind, "x"); !kube.Is(err, errs.KindNotFound) {
				t.Fatalf("get a missing object: %v, want NotFound", err)
			}
			made, err := c.Create(ctx, kind, kube.Object{Name: "x", Labels: map[string]string{"a": "b"}, Data: map[string]string{"k": "v\x00w"}})
			if err != nil || made.ResourceVersion == "" || made.Data["k"] != "v\x00w" || made.Labels["a"] != "b" {
				t.Fatalf("create: %+v %v", made, err)
			}
			if _, err := c.Create(ctx, kind, kube.Object{Name: "x"}); !kube.Is(err, errs.KindAlreadyExists) {
				t.Fatalf("create again: %v, want AlreadyExists", err)
			}
			got, err := c.Get(ctx, kind, "x")
			if err != nil || got.Data["k"] != "v\x00w" || got.ResourceVersion != made.ResourceVersion {
				t.Fatalf("get: %+v %v", got, err)
			}
			got.Data["k"] = "v2"
			upd, err := c.Update(ctx, kind, got)
			if err != nil || upd.Data["k"] != "v2" || upd.ResourceVersion == got.ResourceVersion {
				t.Fatalf("update: %+v %v", upd, err)
			}
			if _, err := c.Update(ctx, kind, got); !kube.Is(err, errs.KindAborted) {
				t.Fatalf("update at a stale version: %v, want Aborted (Conflict)", err)
			}
			if _, err := c.Update(ctx, kind, kube.Object{Name: "x"}); !kube.Is(err, errs.KindInvalid) {
				t.Fatalf("update without a version: %v, want Invalid", err)
			}
		})
	}
	var wire struct {
		Kind string            `json:"kind"`
		Type string            `json:"type"`
		Data map[string][]byte `json:"data"` // base64 strings decode into []byte
	}
	if err := json.Unmarshal(srv.Raw(kube.Secrets, "x"), &wire); err != nil || wire.Kind != "Secret" || wire.Type != "Opaque" || string(wire.Data["k"]) != "v2" {
		t.Fatalf("the Secret as stored: %+v %v", wire, err)
	}
}

// The token is read at every call (the kubelet rotates projected
// tokens), a wrong one is Unauthenticated, RBAC's refusal is
// PermissionDenied, and an API server the CA does not vouch for is never
// sent the token.
func TestClientCredentials(t *testing.T) {
	srv := kubetest.New(t, "cast", []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}, ResourceNames: []string{"mine"}}})
	cfg := srv.Config(t)
	c, err := kube.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if _, err := c.Get(ctx, kube.Secrets, "mine"); !kube.Is(err, errs.KindNotFound) {
		t.Fatalf("get an allowed, missing Secret: %v", err)
	}
	if _, err := c.Get(ctx, kube.Secrets, "other"); !kube.Is(err, errs.KindPermissionDenied) {
		t.Fatalf("get a Secret the Role does not name: %v, want PermissionDenied", err)
	}
	if _, err := c.Get(ctx, kube.ConfigMaps, "mine"); !kube.Is(err, errs.KindPermissionDenied) {
		t.Fatalf("get a ConfigMap: %v, want PermissionDenied", err)
	}
	good, _ := os.ReadFile(cfg.TokenFile)
	if err := os.WriteFile(cfg.TokenFile, []byte("rotated-away"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, kube.Secrets, "mine"); !kube.Is(err, errs.KindUnauthenticated) {
		t.Fatalf("get with a wrong token: %v, want Unauthenticated", err)
	}
	if err := os.WriteFile(cfg.TokenFile, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, kube.Secrets, "mine"); !kube.Is(err, errs.KindNotFound) {
		t.Fatalf("get after the token file is right again: %v", err)
	}
	other := kubetest.New(t, "cast", nil).Config(t)
	other.Host = cfg.Host // the other server's CA, this server
	oc, err := kube.New(other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := oc.Get(ctx, kube.Secrets, "mine"); !kube.Is(err, errs.KindUnavailable) {
		t.Fatalf("get from a server the CA does not vouch for: %v, want a TLS failure", err)
	}
	if n := srv.Requests(); n != 5 { // the five above; not the one refused at the handshake
		t.Errorf("the server had %d requests, want 5", n)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  kube.Config
	}{
		{"plain http", kube.Config{Host: "http://10.0.0.1:443", Namespace: "n", TokenFile: "t", CAFile: "c"}},
		{"no namespace", kube.Config{Host: "https://10.0.0.1:443", TokenFile: "t", CAFile: "c"}},
		{"no token", kube.Config{Host: "https://10.0.0.1:443", Namespace: "n", CAFile: "c"}},
	} {
		if err := tc.cfg.Validate(); err == nil {
			t.Errorf("%s: Validate passed", tc.name)
		}
	}
}

// Outside a pod (no KUBERNETES_SERVICE_HOST) InCluster refuses with why,
// and makes no client.
func TestInClusterOutsideAPod(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	c, err := kube.InCluster()
	if err == nil || c != nil || !strings.Contains(err.Error(), "not in a pod") {
		t.Fatalf("InCluster outside a pod: %v, %v; want no client and a not-in-a-pod error", c, err)
	}
}
