//go:build k8s

// Built only with the k8s tag (`make test-k8s`): it needs a real
// kube-apiserver, whose build from the Go module proxy takes up to 17
// minutes, past the default run's budget; without the server it fails.

package deploy_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/cast-dev/cast/internal/kube"
	"github.com/cast-dev/cast/internal/kubeboot"
	"github.com/cast-dev/cast/internal/pki"
	"github.com/cast-dev/cast/internal/testharness"
)

// KubeAPIServerEnv names a kube-apiserver binary: `make kube-apiserver`
// builds one from the Go module proxy (deploy/kube-apiserver), which takes
// minutes, so the ordinary test run goes without.
const KubeAPIServerEnv = "CAST_KUBE_APISERVER"

// apiServer is a real kube-apiserver over an embedded etcd, RBAC and the
// default admission plugins on (PodSecurity among them), no controllers:
// objects are stored and checked, nothing runs them.
type apiServer struct {
	url, admin, caFile string
	hc                 *http.Client
}

func startAPIServer(t *testing.T) *apiServer {
	bin := os.Getenv(KubeAPIServerEnv)
	if bin == "" {
		t.Fatalf("%s is not set: no real API server to install into (make test-k8s builds one and sets it; docs/install-kubernetes.md)", KubeAPIServerEnv)
	}
	dir := t.TempDir()
	caPEM, caKey, err := pki.NewNamedCA("test API server CA", time.Hour)
	must(t, err)
	ca, err := pki.LoadCA(caPEM, caKey)
	must(t, err)
	certPEM, keyPEM, err := ca.Leaf("kube-apiserver", []string{"127.0.0.1", "localhost"}, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, time.Hour)
	must(t, err)
	saKey, err := pki.NewKey()
	must(t, err)
	saPEM, err := pki.KeyPEM(saKey)
	must(t, err)
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	must(t, err)
	s := &apiServer{admin: "admin-token-for-the-test", caFile: filepath.Join(dir, "ca.crt")}
	files := map[string][]byte{"ca.crt": caPEM, "tls.crt": certPEM, "tls.key": keyPEM, "sa.key": saPEM, "sa.pub": pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub}),
		"tokens.csv": []byte(s.admin + ",admin,admin-uid,system:masters\n")}
	for name, b := range files {
		must(t, os.WriteFile(filepath.Join(dir, name), b, 0o600))
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	etcd := testharness.StartEtcd(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin,
		"--etcd-servers="+etcd, "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
		"--tls-cert-file="+filepath.Join(dir, "tls.crt"), "--tls-private-key-file="+filepath.Join(dir, "tls.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+filepath.Join(dir, "sa.pub"), "--service-account-signing-key-file="+filepath.Join(dir, "sa.key"),
		"--token-auth-file="+filepath.Join(dir, "tokens.csv"), "--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.96.0.0/16", "--endpoint-reconciler-type=none", "--cert-dir="+filepath.Join(dir, "certs"))
	log, err := os.Create(filepath.Join(dir, "kube-apiserver.log"))
	must(t, err)
	cmd.Stdout, cmd.Stderr = log, log
	must(t, cmd.Start())
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cancel()
		<-exited
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("kube-apiserver's log, last lines:\n%s", tail(string(b), 40))
		}
	})
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	s.url = fmt.Sprintf("https://127.0.0.1:%d", port)
	s.hc = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	testharness.WaitFor(t, 90*time.Second, "kube-apiserver ready", func() bool {
		select {
		case <-exited:
			t.Fatal("kube-apiserver exited")
		default:
		}
		code, _ := s.call(t, http.MethodGet, "/readyz", nil)
		return code == http.StatusOK
	})
	return s
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// call sends body (JSON) as the admin; it returns the status and reply.
func (s *apiServer) call(t *testing.T, method, path string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		must(t, err)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.url+path, r)
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+s.admin)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// create stores obj in ns (dry run only if dry), checking fields strictly;
// it fails the test on a refusal.
func (s *apiServer) create(t *testing.T, ns string, obj map[string]any, dry bool) {
	t.Helper()
	path := collection(t, obj, ns) + "?fieldValidation=Strict"
	if dry {
		path += "&dryRun=All"
	}
	code, b := s.call(t, http.MethodPost, path, obj)
	if code != http.StatusCreated && code != http.StatusOK {
		t.Errorf("create %s %v: %d %s", obj["kind"], obj["metadata"].(map[string]any)["name"], code, b)
	}
}

// collection is the REST path of obj's kind in ns.
func collection(t *testing.T, obj map[string]any, ns string) string {
	t.Helper()
	plural := map[string]string{"ConfigMap": "configmaps", "Secret": "secrets", "Service": "services", "ServiceAccount": "serviceaccounts",
		"Pod": "pods", "Deployment": "deployments", "StatefulSet": "statefulsets", "DaemonSet": "daemonsets", "Job": "jobs",
		"Role": "roles", "RoleBinding": "rolebindings", "PodDisruptionBudget": "poddisruptionbudgets", "NetworkPolicy": "networkpolicies",
		"Namespace": "namespaces"}[obj["kind"].(string)]
	if plural == "" {
		t.Fatalf("no REST path for kind %s", obj["kind"])
	}
	gv := obj["apiVersion"].(string)
	base := "/apis/" + gv
	if gv == "v1" {
		base = "/api/v1"
	}
	if ns == "" {
		return base + "/" + plural
	}
	return base + "/namespaces/" + ns + "/" + plural
}

// objects is what kustomize builds of dir, as the API takes it.
func objects(t *testing.T, dir string) []map[string]any {
	t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	must(t, err)
	var out []map[string]any
	for _, r := range res.Resources() {
		m, err := r.Map()
		must(t, err)
		out = append(out, m)
	}
	return out
}

// serviceAccountToken is a token of sa from the TokenRequest API, as the
// kubelet mounts one, written to a file.
func (s *apiServer) serviceAccountToken(t *testing.T, ns, sa string) string {
	t.Helper()
	code, b := s.call(t, http.MethodPost, "/api/v1/namespaces/"+ns+"/serviceaccounts/"+sa+"/token",
		map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": map[string]any{"expirationSeconds": 3600}})
	if code != http.StatusCreated {
		t.Fatalf("token for %s: %d %s", sa, code, b)
	}
	var tr struct {
		Status struct{ Token string } `json:"status"`
	}
	must(t, json.Unmarshal(b, &tr))
	f := filepath.Join(t.TempDir(), "token")
	must(t, os.WriteFile(f, []byte(tr.Status.Token), 0o600))
	return f
}

// Into a real API server: every overlay's objects of built-in kinds are
// accepted with strict field validation (the Prometheus Operator's and
// cert-manager's kinds need their CRDs, which are not here: the strict Go
// decode checks them); every workload's pod is admitted by PodSecurity in
// a namespace that enforces restricted; and the bootstrap and the
// publisher do their work with the tokens of their own service accounts,
// under the Roles the install grants, while the API server refuses them
// anything more.
func TestInstallIntoAPIServer(t *testing.T) {
	s := startAPIServer(t)
	for i, dir := range overlays {
		ns := fmt.Sprintf("cast-%d", i)
		s.create(t, "", map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns,
			"labels": map[string]any{"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}}, false)
		// No controller-manager makes the namespace's default service account.
		s.create(t, ns, map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "default"}}, false)
		n := 0
		for _, obj := range objects(t, dir) {
			group, _, _ := strings.Cut(obj["apiVersion"].(string), "/")
			if group == "monitoring.coreos.com" || group == "cert-manager.io" {
				continue
			}
			obj["metadata"].(map[string]any)["namespace"] = ns
			if subjects, ok := obj["subjects"].([]any); ok {
				for _, sub := range subjects {
					sub.(map[string]any)["namespace"] = ns
				}
			}
			s.create(t, ns, obj, false)
			if tmpl := podTemplateOf(obj); tmpl != nil {
				n++
				pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": tmpl["metadata"], "spec": tmpl["spec"]}
				pod["metadata"].(map[string]any)["name"] = fmt.Sprintf("%s-pod", obj["metadata"].(map[string]any)["name"])
				s.create(t, ns, pod, true) // PodSecurity admits it or says why not
			}
		}
		if n < 3 {
			t.Errorf("%s: %d workloads; want the control plane, the node and the bootstrap Job", dir, n)
		}
	}
	checkRolesForReal(t, s, "cast-0") // the dev overlay's objects
}

// podTemplateOf is a workload's pod template, with a StatefulSet's
// claim templates as the claims its controller would give each pod.
func podTemplateOf(obj map[string]any) map[string]any {
	spec, _ := obj["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	if tmpl == nil {
		return nil
	}
	if tmpl["metadata"] == nil {
		tmpl["metadata"] = map[string]any{}
	}
	claims, _ := spec["volumeClaimTemplates"].([]any)
	podSpec := tmpl["spec"].(map[string]any)
	for _, c := range claims {
		name := c.(map[string]any)["metadata"].(map[string]any)["name"].(string)
		vols, _ := podSpec["volumes"].([]any)
		podSpec["volumes"] = append(vols, map[string]any{"name": name, "persistentVolumeClaim": map[string]any{"claimName": name + "-0"}})
	}
	return tmpl
}

// checkRolesForReal runs the bootstrap and the publisher in ns with their
// service accounts' tokens, and shows the API server refusing each a
// step outside its Role.
func checkRolesForReal(t *testing.T, s *apiServer, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := func(sa string) *kube.Client {
		c, err := kube.New(kube.Config{Host: s.url, Namespace: ns, TokenFile: s.serviceAccountToken(t, ns, sa), CAFile: s.caFile})
		must(t, err)
		return c
	}
	boot, cp := client("cast-bootstrap"), client("cast-controlplane")
	lg := zaptest.NewLogger(t)
	bcfg := kubeboot.DefaultBootstrapConfig()
	bcfg.EtcdTLS = true
	must(t, kubeboot.Bootstrap(ctx, boot, bcfg, lg))
	must(t, kubeboot.Bootstrap(ctx, boot, bcfg, lg)) // again: reads only
	pub, err := kubeboot.NewPublisher(cp, kubeboot.DefaultPublishConfig(), lg)
	must(t, err)
	must(t, pub.Once(ctx, fixedSource{}))
	if o, err := cp.Get(ctx, kube.Secrets, kubeboot.JoinSecret); err != nil || o.Data[kubeboot.KeyJoinToken] != "cast_published" {
		t.Errorf("the published join Secret: %+v %v", o, err)
	}
	for _, tc := range []struct {
		what string
		err  error
	}{
		{"the bootstrap reads the join Secret", get(ctx, boot, kube.Secrets, kubeboot.JoinSecret)},
		{"the control plane reads its own Secret", get(ctx, cp, kube.Secrets, kubeboot.ControlPlaneSecret)},
		{"the control plane reads etcd's PKI", get(ctx, cp, kube.Secrets, kubeboot.EtcdTLSSecret)},
		{"the bootstrap reads a ConfigMap", get(ctx, boot, kube.ConfigMaps, kubeboot.CAConfigMap)},
		{"the bootstrap updates its Secret", update(ctx, boot, kubeboot.ControlPlaneSecret)},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), "403") {
			t.Errorf("%s: %v, want 403 Forbidden", tc.what, tc.err)
		}
	}
	// cast-0's bootstrap token, aimed at another install's namespace.
	elsewhere, err := kube.New(kube.Config{Host: s.url, Namespace: "cast-1", TokenFile: s.serviceAccountToken(t, ns, "cast-bootstrap"), CAFile: s.caFile})
	must(t, err)
	if err := get(ctx, elsewhere, kube.Secrets, kubeboot.ControlPlaneSecret); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("the bootstrap of %s reads cast-1's Secret: %v, want 403 Forbidden", ns, err)
	}
}

func get(ctx context.Context, c *kube.Client, kind kube.Kind, name string) error {
	_, err := c.Get(ctx, kind, name)
	return err
}

func update(ctx context.Context, c *kube.Client, name string) error {
	_, err := c.Update(ctx, kube.Secrets, kube.Object{Name: name, ResourceVersion: "1", Data: map[string]string{"x": "y"}})
	return err
}

type fixedSource struct{}

func (fixedSource) CABundle() ([]byte, string) { return []byte("BUNDLE"), "sha256:pin" }
func (fixedSource) NewJoinToken(context.Context, time.Duration, int) (string, error) {
	return "cast_published", nil
}
func (fixedSource) JoinTokenUses(context.Context, string) (int, error) { return 1000, nil }

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
