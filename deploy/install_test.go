package deploy_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/cast-dev/cast/internal/kubeboot"
)

// written is what cast writes into its namespace (internal/kubeboot), by
// who and under which keys.
var written = map[string]struct {
	by   string // the service account that writes it
	keys []string
}{
	"Secret/" + kubeboot.ControlPlaneSecret: {"cast-bootstrap", []string{kubeboot.KeyAdminToken, kubeboot.KeySecretsKey}},
	"Secret/" + kubeboot.EtcdTLSSecret:      {"cast-bootstrap", []string{"ca.crt", "server.crt", "server.key", "client.crt", "client.key"}},
	"Secret/" + kubeboot.JoinSecret:         {"cast-controlplane", []string{kubeboot.KeyJoinToken, kubeboot.KeyCAPin, kubeboot.KeyExpires}},
	"ConfigMap/" + kubeboot.CAConfigMap:     {"cast-controlplane", []string{kubeboot.KeyCABundle}},
}

// ref is one Secret or ConfigMap key an object needs to exist.
type ref struct {
	obj, key string // Kind/name; "" for a whole volume
	from     string // who needs it
}

// `kubectl apply -k` of any overlay into an empty namespace needs no
// object made by hand: every Secret and ConfigMap a workload or a monitor
// needs (optional ones aside) is in the build, written by cert-manager
// from a Certificate in the build, made by the bootstrap Job (only
// cast-etcd-tls with --etcd-tls), or published by a control plane run
// with --publish-k8s, with the keys used.
func TestOnePhaseInstall(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			objs := build(t, dir)
			made := map[string]bool{}
			for name, obj := range objs {
				made[name] = true
				if c, ok := obj.(*certificate); ok {
					made["Secret/"+c.Spec.SecretName] = true
				}
			}
			for _, by := range writers(objs) {
				for w, spec := range written {
					if spec.by == by && (w != "Secret/"+kubeboot.EtcdTLSSecret || etcdTLSBootstrap(objs)) {
						made[w] = true
					}
				}
			}
			refs := needed(objs)
			if len(refs) < 4 {
				t.Fatalf("found %d references; the walk misses some", len(refs))
			}
			for _, r := range refs {
				if !made[r.obj] {
					t.Errorf("%s needs %s, which nothing in the install makes (made: %v)", r.from, r.obj, slices.Sorted(maps.Keys(made)))
					continue
				}
				if w, ok := written[r.obj]; ok && r.key != "" && !slices.Contains(w.keys, r.key) {
					t.Errorf("%s needs key %s of %s, which cast does not write (it writes %v)", r.from, r.key, r.obj, w.keys)
				}
			}
		})
	}
}

// writers maps each workload that writes into the namespace to its
// service account: the bootstrap Job, and control planes with
// --publish-k8s.
func writers(objs map[string]any) map[string]string {
	out := map[string]string{}
	for name, obj := range objs {
		spec := podSpec(obj)
		if spec == nil {
			continue
		}
		for _, c := range spec.Containers {
			if slices.Contains(c.Args, "k8s-bootstrap") || slices.Contains(c.Args, "--publish-k8s") {
				out[name] = spec.ServiceAccountName
			}
		}
	}
	return out
}

func etcdTLSBootstrap(objs map[string]any) bool {
	spec := podSpec(objs["Job/cast-bootstrap"])
	return spec != nil && slices.Contains(spec.Containers[0].Args, "--etcd-tls")
}

// needed lists every Secret and ConfigMap (and key) the build's workloads
// and monitors need, optional ones left out.
func needed(objs map[string]any) []ref {
	var out []ref
	for name, obj := range objs {
		if m, ok := obj.(*monitoringv1.ServiceMonitor); ok {
			for _, e := range m.Spec.Endpoints {
				if e.TLSConfig != nil {
					out = append(out, safeTLSRefs(name, &e.TLSConfig.SafeTLSConfig)...)
				}
			}
		}
		if m, ok := obj.(*monitoringv1.PodMonitor); ok {
			for _, e := range m.Spec.PodMetricsEndpoints {
				out = append(out, safeTLSRefs(name, e.TLSConfig)...)
			}
		}
		spec := podSpec(obj)
		if spec == nil {
			continue
		}
		for _, c := range allContainers(spec) {
			from := name + " container " + c.Name
			for _, e := range c.Env {
				if v := e.ValueFrom; v != nil && v.SecretKeyRef != nil && !optional(v.SecretKeyRef.Optional) {
					out = append(out, ref{"Secret/" + v.SecretKeyRef.Name, v.SecretKeyRef.Key, from})
				} else if v != nil && v.ConfigMapKeyRef != nil && !optional(v.ConfigMapKeyRef.Optional) {
					out = append(out, ref{"ConfigMap/" + v.ConfigMapKeyRef.Name, v.ConfigMapKeyRef.Key, from})
				}
			}
			for _, e := range c.EnvFrom {
				if e.SecretRef != nil && !optional(e.SecretRef.Optional) {
					out = append(out, ref{"Secret/" + e.SecretRef.Name, "", from})
				}
				if e.ConfigMapRef != nil && !optional(e.ConfigMapRef.Optional) {
					out = append(out, ref{"ConfigMap/" + e.ConfigMapRef.Name, "", from})
				}
			}
		}
		for _, v := range spec.Volumes {
			out = append(out, volumeRefs(name+" volume "+v.Name, v.VolumeSource)...)
		}
	}
	return out
}

func volumeRefs(from string, vs corev1.VolumeSource) []ref {
	var out []ref
	add := func(kind, name string, items []corev1.KeyToPath, opt *bool) {
		if optional(opt) {
			return
		}
		out = append(out, ref{kind + "/" + name, "", from})
		for _, it := range items {
			out = append(out, ref{kind + "/" + name, it.Key, from})
		}
	}
	if s := vs.Secret; s != nil {
		add("Secret", s.SecretName, s.Items, s.Optional)
	}
	if c := vs.ConfigMap; c != nil {
		add("ConfigMap", c.Name, c.Items, c.Optional)
	}
	if p := vs.Projected; p != nil {
		for _, src := range p.Sources {
			if s := src.Secret; s != nil {
				add("Secret", s.Name, s.Items, s.Optional)
			}
			if c := src.ConfigMap; c != nil {
				add("ConfigMap", c.Name, c.Items, c.Optional)
			}
		}
	}
	return out
}

func safeTLSRefs(from string, tc *monitoringv1.SafeTLSConfig) []ref {
	if tc == nil {
		return nil
	}
	var out []ref
	if c := tc.CA.ConfigMap; c != nil && !optional(c.Optional) {
		out = append(out, ref{"ConfigMap/" + c.Name, c.Key, from})
	}
	if s := tc.CA.Secret; s != nil && !optional(s.Optional) {
		out = append(out, ref{"Secret/" + s.Name, s.Key, from})
	}
	return out
}

func optional(b *bool) bool { return b != nil && *b }

// The bootstrap's and the control plane's API access is narrow: each
// service account is bound to its own Role, which may create Secrets
// (and ConfigMaps) and get or update only the objects it writes, by name;
// nothing lists, watches, patches or deletes, nothing uses a wildcard or
// another API group. Only the pods that write get a service-account
// token.
func TestBootstrapAccessIsNarrow(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			objs := build(t, dir)
			ws := writers(objs)
			for name, obj := range objs {
				spec := podSpec(obj)
				if spec == nil {
					continue
				}
				mounts := spec.AutomountServiceAccountToken != nil && *spec.AutomountServiceAccountToken
				if _, writes := ws[name]; mounts != writes {
					t.Errorf("%s: mounts a service-account token %v, writes into the namespace %v", name, mounts, writes)
				}
			}
			if len(ws) < 2 {
				t.Fatalf("writers %v: want the bootstrap Job and a control plane", ws)
			}
			for name, sa := range ws {
				if objs["ServiceAccount/"+sa] == nil {
					t.Errorf("%s runs as service account %q, which the build lacks", name, sa)
					continue
				}
				rb, _ := objs["RoleBinding/"+sa].(*rbacv1.RoleBinding)
				if rb == nil || rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != sa || len(rb.Subjects) != 1 ||
					rb.Subjects[0].Kind != "ServiceAccount" || rb.Subjects[0].Name != sa || rb.Subjects[0].Namespace != "cast" {
					t.Errorf("RoleBinding/%s: want the Role %s bound to the service account %s of the namespace alone: %+v", sa, sa, sa, rb)
				}
				role, _ := objs["Role/"+sa].(*rbacv1.Role)
				if role == nil {
					t.Errorf("no Role/%s", sa)
					continue
				}
				checkRole(t, role, sa)
			}
		})
	}
}

// checkRole: only create (no name can be given) and get/update of the
// objects sa writes, by name.
func checkRole(t *testing.T, role *rbacv1.Role, sa string) {
	t.Helper()
	mine := map[string][]string{} // resource -> names
	for w, spec := range written {
		if spec.by == sa {
			kind, name, _ := strings.Cut(w, "/")
			res := strings.ToLower(kind) + "s"
			mine[res] = append(mine[res], name)
		}
	}
	for _, r := range role.Rules {
		if !slices.Equal(r.APIGroups, []string{""}) || len(r.NonResourceURLs) > 0 {
			t.Errorf("Role/%s: a rule beyond the core group's objects: %+v", sa, r)
		}
		for _, res := range r.Resources {
			if mine[res] == nil {
				t.Errorf("Role/%s reaches %s, which %s does not write", sa, res, sa)
			}
		}
		for _, v := range r.Verbs {
			switch v {
			case "create":
				if len(r.ResourceNames) > 0 {
					t.Errorf("Role/%s: create with resourceNames never matches (RBAC cannot name what is created)", sa)
				}
			case "get", "update":
				for _, n := range r.ResourceNames {
					for _, res := range r.Resources {
						if !slices.Contains(mine[res], n) {
							t.Errorf("Role/%s may %s %s %s, which it does not write", sa, v, res, n)
						}
					}
				}
				if len(r.ResourceNames) == 0 {
					t.Errorf("Role/%s may %s every %v of the namespace; name them", sa, v, r.Resources)
				}
			default:
				t.Errorf("Role/%s grants %q; want create, get and update alone", sa, v)
			}
		}
	}
}
