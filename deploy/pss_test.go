package deploy_test

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// overlays is every folder `kubectl apply -k` takes.
var overlays = []string{"k8s", "k8s/overlays/dev", "k8s/overlays/ha", "k8s/overlays/ha-cert-manager"}

// podTemplate is the pod template of a workload, or nil for another kind.
func podTemplate(obj any) *corev1.PodTemplateSpec {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return &o.Spec.Template
	case *appsv1.StatefulSet:
		return &o.Spec.Template
	case *appsv1.DaemonSet:
		return &o.Spec.Template
	case *batchv1.Job:
		return &o.Spec.Template
	}
	return nil
}

// podSpec is the pod spec of a workload, or nil for another kind.
func podSpec(obj any) *corev1.PodSpec {
	if t := podTemplate(obj); t != nil {
		return &t.Spec
	}
	return nil
}

// allContainers is every container of spec, init containers included: the
// standard holds them all.
func allContainers(spec *corev1.PodSpec) []corev1.Container {
	return append(slices.Clone(spec.InitContainers), spec.Containers...)
}

// restricted is the Pod Security Admission's own evaluator (the code an
// API server enforces pod-security.kubernetes.io/enforce=restricted
// with), at the latest version of the standard.
func restricted(t *testing.T, meta *metav1.ObjectMeta, spec *corev1.PodSpec) policy.AggregateCheckResult {
	t.Helper()
	return evaluate(t, psaapi.LevelRestricted, meta, spec)
}

func evaluate(t *testing.T, level psaapi.Level, meta *metav1.ObjectMeta, spec *corev1.PodSpec) policy.AggregateCheckResult {
	t.Helper()
	ev, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	lv := psaapi.LevelVersion{Level: level, Version: psaapi.LatestVersion()}
	return policy.AggregateCheckResults(ev.EvaluatePod(lv, meta, spec))
}

// eachContainer names the first container ok refuses, or "".
func eachContainer(s *corev1.PodSpec, ok func(corev1.Container, *corev1.SecurityContext) bool) string {
	for _, c := range allContainers(s) {
		if !ok(c, c.SecurityContext) {
			return "container " + c.Name
		}
	}
	return ""
}

// Every workload every overlay builds passes the restricted Pod Security
// Standard, as k8s.io/pod-security-admission's evaluator judges it (no
// API server runs here: docs/install-kubernetes.md), and more than it
// asks: a read-only root filesystem everywhere (writable folders are
// emptyDirs or volumes).
func TestPodSecurityRestricted(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			n := 0
			for name, obj := range build(t, dir) {
				spec := podSpec(obj)
				if spec == nil {
					continue
				}
				n++
				if res := restricted(t, &podTemplate(obj).ObjectMeta, spec); !res.Allowed {
					t.Errorf("%s breaks the restricted standard: %s", name, strings.Join(forbidden(res), "; "))
				}
				if why := eachContainer(spec, func(c corev1.Container, sc *corev1.SecurityContext) bool {
					return sc != nil && sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem
				}); why != "" {
					t.Errorf("%s: %s has a writable root filesystem", name, why)
				}
			}
			if n < 3 {
				t.Fatalf("%s: %d workloads built; want the control plane, the node and the bootstrap Job at least", dir, n)
			}
		})
	}
}

// forbidden is each refusal as "reason (detail)".
func forbidden(res policy.AggregateCheckResult) []string {
	out := make([]string, len(res.ForbiddenReasons))
	for i, r := range res.ForbiddenReasons {
		out[i] = r + " (" + res.ForbiddenDetails[i] + ")"
	}
	return out
}

// The evaluator refuses what it is here for: the node DaemonSet as it
// was (a hostPath, a root init container adding CHOWN and FOWNER, no
// seccomp profile) fails baseline and restricted, each check by name.
func TestPodSecurityRulesRefuse(t *testing.T) {
	root, yes, no := int64(0), true, false
	bad := &corev1.PodSpec{
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/cast-node"}}}},
		InitContainers: []corev1.Container{{Name: "own-data", SecurityContext: &corev1.SecurityContext{
			RunAsUser: &root, RunAsNonRoot: &no, AllowPrivilegeEscalation: &yes,
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"CHOWN", "FOWNER"}}}}},
		Containers: []corev1.Container{{Name: "node"}},
	}
	for _, tc := range []struct {
		level psaapi.Level
		want  []string
	}{
		// Restricted's checks replace baseline's for volumes and capabilities.
		{psaapi.LevelBaseline, []string{"hostPath volumes"}}, // CHOWN and FOWNER are among baseline's defaults
		{psaapi.LevelRestricted, []string{"restricted volume types", "allowPrivilegeEscalation != false",
			"runAsNonRoot != true", "runAsUser=0", "seccompProfile", "unrestricted capabilities"}},
	} {
		res := evaluate(t, tc.level, &metav1.ObjectMeta{}, bad)
		for _, want := range tc.want {
			if res.Allowed || !slices.Contains(res.ForbiddenReasons, want) {
				t.Errorf("%s: not refused for %q (refused for %v)", tc.level, want, res.ForbiddenReasons)
			}
		}
	}
}
