// Package deploy_test checks the deployment files: the kustomization
// builds, and every object it yields decodes strictly into its
// Kubernetes API type (a misspelt or misplaced field fails).
package deploy_test

import (
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/cast-dev/cast/internal/pki"
)

// kinds are the API types the manifests may hold; an object of another
// kind fails the test until its type is added here.
var kinds = map[string]func() any{
	"apps/v1/StatefulSet":                      func() any { return &appsv1.StatefulSet{} },
	"apps/v1/Deployment":                       func() any { return &appsv1.Deployment{} },
	"apps/v1/DaemonSet":                        func() any { return &appsv1.DaemonSet{} },
	"batch/v1/Job":                             func() any { return &batchv1.Job{} },
	"v1/Service":                               func() any { return &corev1.Service{} },
	"v1/ConfigMap":                             func() any { return &corev1.ConfigMap{} },
	"v1/ServiceAccount":                        func() any { return &corev1.ServiceAccount{} },
	"rbac.authorization.k8s.io/v1/Role":        func() any { return &rbacv1.Role{} },
	"rbac.authorization.k8s.io/v1/RoleBinding": func() any { return &rbacv1.RoleBinding{} },
	"policy/v1/PodDisruptionBudget":            func() any { return &policyv1.PodDisruptionBudget{} },
	"networking.k8s.io/v1/NetworkPolicy":       func() any { return &networkingv1.NetworkPolicy{} },
	"monitoring.coreos.com/v1/ServiceMonitor":  func() any { return &monitoringv1.ServiceMonitor{} },
	"monitoring.coreos.com/v1/PodMonitor":      func() any { return &monitoringv1.PodMonitor{} },
	"monitoring.coreos.com/v1/PrometheusRule":  func() any { return &monitoringv1.PrometheusRule{} },
	"cert-manager.io/v1/Certificate":           func() any { return &certificate{} },
	"cert-manager.io/v1/Issuer":                func() any { return &issuer{} },
}

// certificate and issuer are the fields of cert-manager's Certificate and
// Issuer (cert-manager.io/v1) the manifests use, spelt as its API has them
// (its Go module is not a dependency here): a misspelt field still fails
// the strict decode.
type certificate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		IsCA        bool     `json:"isCA,omitempty"`
		CommonName  string   `json:"commonName,omitempty"`
		SecretName  string   `json:"secretName"`
		DNSNames    []string `json:"dnsNames,omitempty"`
		IPAddresses []string `json:"ipAddresses,omitempty"`
		Duration    string   `json:"duration,omitempty"`
		RenewBefore string   `json:"renewBefore,omitempty"`
		PrivateKey  struct {
			Algorithm      string `json:"algorithm,omitempty"`
			Size           int    `json:"size,omitempty"`
			RotationPolicy string `json:"rotationPolicy,omitempty"`
		} `json:"privateKey"`
		Usages    []string `json:"usages,omitempty"`
		IssuerRef struct {
			Name string `json:"name"`
			Kind string `json:"kind,omitempty"`
		} `json:"issuerRef"`
	} `json:"spec"`
}

type issuer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		SelfSigned *struct{} `json:"selfSigned,omitempty"`
		CA         *struct {
			SecretName string `json:"secretName"`
		} `json:"ca,omitempty"`
	} `json:"spec"`
}

// build runs kustomize on dir and decodes every object strictly into its
// API type (a misspelt or misplaced field fails), keyed Kind/name.
func build(t *testing.T, dir string) map[string]any {
	t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	objs := map[string]any{}
	for _, r := range res.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		key := r.GetApiVersion() + "/" + r.GetKind()
		mk, ok := kinds[key]
		if !ok {
			t.Errorf("%s: %s %s: no API type to check it against", dir, key, r.GetName())
			continue
		}
		obj := mk()
		if err := yaml.UnmarshalStrict(b, obj); err != nil {
			t.Errorf("%s: %s %s does not decode strictly: %v", dir, key, r.GetName(), err)
		}
		objs[r.GetKind()+"/"+r.GetName()] = obj
	}
	return objs
}

// `kubectl apply -k` works for deploy/k8s (the dev overlay) and both
// overlays: each builds, holds what it promises, and ships the alert rules
// as the ConfigMap cast-alerts (not as a raw manifest, which apply cannot
// read).
func TestKustomizeBuilds(t *testing.T) {
	common := []string{"Service/cast-controlplane", "DaemonSet/cast-node", "ConfigMap/cast-alerts", "Job/cast-bootstrap",
		"ServiceAccount/cast-bootstrap", "ServiceAccount/cast-controlplane", "Role/cast-bootstrap", "Role/cast-controlplane"}
	for _, tc := range []struct {
		dir  string
		want []string
	}{
		{"k8s", []string{"StatefulSet/cast-controlplane"}},
		{"k8s/overlays/dev", []string{"StatefulSet/cast-controlplane"}},
		{"k8s/overlays/ha-cert-manager", []string{
			"Certificate/cast-etcd-ca", "Issuer/cast-etcd-ca", "Certificate/cast-etcd-server", "Certificate/cast-etcd-client",
			"StatefulSet/cast-etcd", "Deployment/cast-controlplane",
		}},
		{"k8s/overlays/ha", []string{
			"Deployment/cast-controlplane", "StatefulSet/cast-etcd", "Service/cast-etcd",
			"PodDisruptionBudget/cast-controlplane", "PodDisruptionBudget/cast-etcd",
			"NetworkPolicy/cast-etcd", "NetworkPolicy/cast-controlplane", "NetworkPolicy/cast-node",
			"ServiceMonitor/cast-controlplane", "PodMonitor/cast-node", "PrometheusRule/cast-alerts",
			"ConfigMap/cast-grafana-dashboards",
		}},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			objs := build(t, tc.dir)
			for _, want := range append(tc.want, common...) {
				if objs[want] == nil {
					t.Errorf("the build lacks %s (has %v)", want, slices.Sorted(maps.Keys(objs)))
				}
			}
			if cm, ok := objs["ConfigMap/cast-alerts"].(*corev1.ConfigMap); ok {
				want, err := os.ReadFile("k8s/base/cast-alerts.rules.yml")
				if err != nil {
					t.Fatal(err)
				}
				if cm.Data["cast-alerts.rules.yml"] != string(want) {
					t.Errorf("ConfigMap cast-alerts does not hold cast-alerts.rules.yml")
				}
			}
			if cm, ok := objs["ConfigMap/cast-grafana-dashboards"].(*corev1.ConfigMap); ok {
				checkDashboards(t, cm)
			}
			for name, obj := range objs {
				checkWorkload(t, name, obj)
				checkScrapedOverTLS(t, name, obj)
				checkSetOnce(t, name, obj)
			}
			if objs["ConfigMap/cast-install-settings"] != nil {
				t.Errorf("the local settings ConfigMap is in the build")
			}
		})
	}
	// Every manifest in each folder is in its kustomization.
	for _, dir := range []string{"k8s/base", "k8s/overlays/dev", "k8s/overlays/ha", "k8s/components/cert-manager"} {
		checkListed(t, dir)
	}
}

// checkDashboards: the ConfigMap holds every dashboard in deploy/grafana
// as it is, labelled for Grafana's sidecar.
func checkDashboards(t *testing.T, cm *corev1.ConfigMap) {
	t.Helper()
	files, _ := filepath.Glob("grafana/*.json")
	if len(files) == 0 || len(cm.Data) != len(files) || cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("ConfigMap cast-grafana-dashboards: %d dashboards for %d files, labels %v", len(cm.Data), len(files), cm.Labels)
	}
	for _, f := range files {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if cm.Data[filepath.Base(f)] != string(want) {
			t.Errorf("ConfigMap cast-grafana-dashboards does not hold %s", f)
		}
	}
}

// checkListed fails for a manifest in dir its kustomization leaves out, and
// for a rules file listed as a resource (rule files go in the ConfigMap).
func checkListed(t *testing.T, dir string) {
	t.Helper()
	kust, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k struct{ Resources []string }
	if err := yaml.Unmarshal(kust, &k); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, f := range files {
		if base := filepath.Base(f); base != "kustomization.yaml" && !slices.Contains(k.Resources, base) {
			t.Errorf("%s/%s is not listed in its kustomization.yaml", dir, base)
		}
	}
	for _, r := range k.Resources {
		if strings.HasSuffix(r, ".yml") {
			t.Errorf("%s: %s is a resource; rule files go in the ConfigMap", dir, r)
		}
	}
}

// checkWorkload holds every long-running container to what a restricted
// namespace and a careful operator expect: non-root, no privilege
// escalation, all capabilities dropped, a read-only root, a memory limit
// with GOMEMLIMIT below it, and startup, readiness and liveness probes.
func checkWorkload(t *testing.T, name string, obj any) {
	t.Helper()
	var spec *corev1.PodSpec
	switch o := obj.(type) {
	case *appsv1.Deployment:
		spec = &o.Spec.Template.Spec
	case *appsv1.StatefulSet:
		spec = &o.Spec.Template.Spec
	case *appsv1.DaemonSet:
		spec = &o.Spec.Template.Spec
	default:
		return
	}
	for _, c := range spec.Containers {
		where := name + " container " + c.Name
		sc := c.SecurityContext
		nonRoot := (sc != nil && sc.RunAsNonRoot != nil && *sc.RunAsNonRoot) ||
			(spec.SecurityContext != nil && spec.SecurityContext.RunAsNonRoot != nil && *spec.SecurityContext.RunAsNonRoot)
		if !nonRoot {
			t.Errorf("%s may run as root", where)
		}
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("%s: want allowPrivilegeEscalation false and capabilities drop ALL", where)
		}
		if c.StartupProbe == nil || c.ReadinessProbe == nil || c.LivenessProbe == nil {
			t.Errorf("%s: want startup, readiness and liveness probes", where)
		}
		if c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
			t.Errorf("%s: want a memory limit and a CPU request", where)
		}
		if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "GOMEMLIMIT" }) {
			t.Errorf("%s: want GOMEMLIMIT below its memory limit", where)
		}
	}
}

// checkScrapedOverTLS: cast's metrics ports serve HTTPS (plain HTTP only
// with --insecure), so every probe of a cast container says HTTPS, and
// the Prometheus Operator scrapes them over HTTPS trusting the CA and
// verifying each daemon's fixed name (pki.ServerName for the control
// plane, pki.NodeMetricsName for nodes). etcd's own metrics port is not
// cast's.
func checkScrapedOverTLS(t *testing.T, name string, obj any) {
	t.Helper()
	var spec *corev1.PodSpec
	switch o := obj.(type) {
	case *appsv1.Deployment:
		spec = &o.Spec.Template.Spec
	case *appsv1.StatefulSet:
		spec = &o.Spec.Template.Spec
	case *appsv1.DaemonSet:
		spec = &o.Spec.Template.Spec
	case *monitoringv1.ServiceMonitor:
		if o.Name == "cast-controlplane" {
			for _, e := range o.Spec.Endpoints {
				var tc *monitoringv1.SafeTLSConfig
				if e.TLSConfig != nil {
					tc = &e.TLSConfig.SafeTLSConfig
				}
				checkTLSScrape(t, name, e.Scheme, tc, pki.ServerName)
			}
		}
		return
	case *monitoringv1.PodMonitor:
		if o.Name == "cast-node" {
			for _, e := range o.Spec.PodMetricsEndpoints {
				checkTLSScrape(t, name, e.Scheme, e.TLSConfig, pki.NodeMetricsName)
			}
		}
		return
	default:
		return
	}
	for _, c := range spec.Containers {
		if !strings.HasPrefix(c.Image, "cast/") {
			continue
		}
		for _, p := range []*corev1.Probe{c.StartupProbe, c.ReadinessProbe, c.LivenessProbe} {
			if p == nil || p.HTTPGet == nil || p.HTTPGet.Scheme != corev1.URISchemeHTTPS {
				t.Errorf("%s container %s: a probe is not an HTTPS GET: %+v", name, c.Name, p)
			}
		}
		if a := c.Args; !slices.ContainsFunc(a, func(s string) bool { return strings.HasPrefix(s, "--metrics-listen=") }) ||
			slices.Contains(a, "--insecure") {
			t.Errorf("%s container %s: want --metrics-listen and no --insecure: %v", name, c.Name, a)
		}
	}
}

func checkTLSScrape(t *testing.T, name string, scheme *monitoringv1.Scheme, tc *monitoringv1.SafeTLSConfig, serverName string) {
	t.Helper()
	if scheme.String() != "https" || tc == nil || tc.ServerName == nil || *tc.ServerName != serverName ||
		(tc.CA.ConfigMap == nil && tc.CA.Secret == nil) {
		t.Errorf("%s: want scheme https, a CA and serverName %s; got %v %+v", name, serverName, scheme.String(), tc)
	}
}

// The ha overlay's PrometheusRule holds exactly the groups of
// base/cast-alerts.rules.yml, the file promtool tests. CAST_UPDATE_DEPLOY=1
// rewrites it from the rules file.
func TestPrometheusRuleMatchesRules(t *testing.T) {
	src, err := os.ReadFile("k8s/base/cast-alerts.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []monitoringv1.RuleGroup `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(src, &rules); err != nil {
		t.Fatalf("cast-alerts.rules.yml: %v", err)
	}
	want := monitoringv1.PrometheusRule{
		TypeMeta:   metav1.TypeMeta{APIVersion: "monitoring.coreos.com/v1", Kind: "PrometheusRule"},
		ObjectMeta: metav1.ObjectMeta{Name: "cast-alerts"},
		Spec:       monitoringv1.PrometheusRuleSpec{Groups: rules.Groups},
	}
	path := "k8s/overlays/ha/prometheusrule.yaml"
	if os.Getenv("CAST_UPDATE_DEPLOY") == "1" {
		b, err := yaml.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		head := "# Generated from base/cast-alerts.rules.yml by `CAST_UPDATE_DEPLOY=1 go test ./deploy`;\n# TestPrometheusRuleMatchesRules fails when the two differ.\n"
		if err := os.WriteFile(path, append([]byte(head), b...), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got monitoringv1.PrometheusRule
	if err := yaml.UnmarshalStrict(b, &got); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if !reflect.DeepEqual(got.Spec, want.Spec) {
		t.Errorf("%s differs from base/cast-alerts.rules.yml; run CAST_UPDATE_DEPLOY=1 go test ./deploy", path)
	}
}

// The Dockerfile (docker cannot run in the test machine) builds with the
// module's Go, links the version as the Makefile does, and every image it
// ends in runs as a non-root user.
func TestDockerfile(t *testing.T) {
	src, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	var goVersion string
	for _, line := range strings.Split(string(mod), "\n") {
		if v, ok := strings.CutPrefix(line, "go "); ok {
			goVersion = strings.TrimSpace(v)
		}
	}
	df := string(src)
	if !strings.Contains(df, "ARG GO_VERSION="+goVersion+"\n") {
		t.Errorf("Dockerfile's GO_VERSION is not go.mod's %s", goVersion)
	}
	for _, v := range []string{"internal/version.Version=${VERSION}", "internal/version.Revision=${REVISION}", "CGO_ENABLED=0"} {
		if !strings.Contains(df, v) {
			t.Errorf("Dockerfile's build lacks %s", v)
		}
	}
	// Each stage an image is built from (FROM ... AS name) ends in USER.
	stages := strings.Split(df, "\nFROM ")[1:]
	for _, st := range stages {
		name := strings.Fields(st)[len(strings.Fields(strings.SplitN(st, "\n", 2)[0]))-1]
		if name == "build" || name == "agents" {
			continue
		}
		var user string
		for _, line := range strings.Split(st, "\n") {
			if u, ok := strings.CutPrefix(line, "USER "); ok {
				user = u
			}
		}
		if user == "" || strings.HasPrefix(user, "0") || strings.HasPrefix(user, "root") {
			t.Errorf("image %s runs as %q; want a non-root USER", name, user)
		}
	}
	if len(stages) < 5 {
		t.Errorf("found %d stages; want build, controlplane, cast, agents, node", len(stages))
	}
}

// checkSetOnce: the kustomization's namespace reaches every object, its
// images: give every image a tag, and the NetworkPolicies admit the
// monitoring namespace settings.yaml names (no namespace is written into
// the manifests themselves).
func checkSetOnce(t *testing.T, name string, obj any) {
	t.Helper()
	if m, ok := obj.(metav1.Object); ok && m.GetNamespace() != "cast" {
		t.Errorf("%s: namespace %q, want the kustomization's cast", name, m.GetNamespace())
	}
	if spec := podSpec(obj); spec != nil {
		for _, c := range allContainers(spec) {
			if i := strings.LastIndex(c.Image, ":"); i < 0 || strings.Contains(c.Image[i:], "/") {
				t.Errorf("%s container %s: image %q has no tag (kustomization images:)", name, c.Name, c.Image)
			}
		}
	}
	if np, ok := obj.(*networkingv1.NetworkPolicy); ok {
		for _, in := range np.Spec.Ingress {
			for _, from := range in.From {
				if ns := from.NamespaceSelector; ns != nil && ns.MatchLabels["kubernetes.io/metadata.name"] != "monitoring" {
					t.Errorf("%s admits namespace %q, want settings.yaml's monitoring", name, ns.MatchLabels["kubernetes.io/metadata.name"])
				}
			}
		}
	}
}

// With cert-manager, etcd and the control plane read etcd's certificates
// from the Secrets its Certificates write, under the file names their
// flags name, and nothing still needs the hand-made cast-etcd-tls.
func TestCertManagerEtcdTLS(t *testing.T) {
	objs := build(t, "k8s/overlays/ha-cert-manager")
	secrets := map[string]map[string]string{} // workload -> file -> secret/key
	for _, name := range []string{"StatefulSet/cast-etcd", "Deployment/cast-controlplane"} {
		spec := podSpec(objs[name])
		if spec == nil {
			t.Fatalf("no %s", name)
		}
		secrets[name] = map[string]string{}
		for _, v := range spec.Volumes {
			if v.Secret != nil && v.Secret.SecretName == "cast-etcd-tls" {
				t.Errorf("%s still mounts cast-etcd-tls", name)
			}
			if v.Projected == nil {
				continue
			}
			for _, src := range v.Projected.Sources {
				if src.Secret == nil {
					continue
				}
				for _, it := range src.Secret.Items {
					secrets[name][it.Path] = src.Secret.Name + "/" + it.Key
				}
			}
		}
	}
	for name, want := range map[string]map[string]string{
		"StatefulSet/cast-etcd":        {"ca.crt": "cast-etcd-server/ca.crt", "server.crt": "cast-etcd-server/tls.crt", "server.key": "cast-etcd-server/tls.key"},
		"Deployment/cast-controlplane": {"ca.crt": "cast-etcd-client/ca.crt", "client.crt": "cast-etcd-client/tls.crt", "client.key": "cast-etcd-client/tls.key"},
	} {
		if !reflect.DeepEqual(secrets[name], want) {
			t.Errorf("%s reads %v, want %v", name, secrets[name], want)
		}
	}
	for _, c := range []string{"Certificate/cast-etcd-server", "Certificate/cast-etcd-client"} {
		if cert, ok := objs[c].(*certificate); !ok || cert.Spec.SecretName != strings.TrimPrefix(c, "Certificate/") || cert.Spec.IssuerRef.Name != "cast-etcd-ca" {
			t.Errorf("%s: want its own Secret, issued by cast-etcd-ca: %+v", c, objs[c])
		}
	}
}
