package deploy_test

import (
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// overlays is every folder `kubectl apply -k` takes.
var overlays = []string{"k8s", "k8s/overlays/dev", "k8s/overlays/ha", "k8s/overlays/ha-cert-manager"}

// podSpec is the pod template of a workload, or nil for another kind.
func podSpec(obj any) *corev1.PodSpec {
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return &o.Spec.Template.Spec
	case *appsv1.StatefulSet:
		return &o.Spec.Template.Spec
	case *appsv1.DaemonSet:
		return &o.Spec.Template.Spec
	case *batchv1.Job:
		return &o.Spec.Template.Spec
	}
	return nil
}

// allContainers is every container of spec, init containers included: the
// standard holds them all.
func allContainers(spec *corev1.PodSpec) []corev1.Container {
	return append(slices.Clone(spec.InitContainers), spec.Containers...)
}

// restrictedRules are the controls of the Kubernetes Pod Security
// Standards' restricted profile (which includes baseline), as
// https://kubernetes.io/docs/concepts/security/pod-security-standards/
// lists them; each returns why spec breaks it, or "". The pod-level
// securityContext counts where the standard lets it stand for every
// container.
//
// No API server runs here (no kube-apiserver, kind or k3s on this machine
// or CI: /work/.library/env/machines/go.md lists none, and the registries
// reached carry no such binary), so this test applies the standard's rules
// itself to what kustomize builds; it does not install the objects into a
// namespace labelled pod-security.kubernetes.io/enforce=restricted.
var restrictedRules = []struct {
	name  string
	check func(spec *corev1.PodSpec) string
}{
	{"baseline: HostProcess", func(s *corev1.PodSpec) string {
		if sc := s.SecurityContext; sc != nil && sc.WindowsOptions != nil && sc.WindowsOptions.HostProcess != nil && *sc.WindowsOptions.HostProcess {
			return "pod hostProcess"
		}
		return eachContainer(s, func(c corev1.Container, sc *corev1.SecurityContext) bool {
			return sc == nil || sc.WindowsOptions == nil || sc.WindowsOptions.HostProcess == nil || !*sc.WindowsOptions.HostProcess
		})
	}},
	{"baseline: host namespaces", func(s *corev1.PodSpec) string {
		if s.HostNetwork || s.HostPID || s.HostIPC {
			return "hostNetwork, hostPID or hostIPC"
		}
		return ""
	}},
	{"baseline: privileged containers", func(s *corev1.PodSpec) string {
		return eachContainer(s, func(c corev1.Container, sc *corev1.SecurityContext) bool {
			return sc == nil || sc.Privileged == nil || !*sc.Privileged
		})
	}},
	{"baseline: hostPath volumes", func(s *corev1.PodSpec) string {
		for _, v := range s.Volumes {
			if v.HostPath != nil {
				return "volume " + v.Name + " is a hostPath"
			}
		}
		return ""
	}},
	{"baseline: host ports", func(s *corev1.PodSpec) string {
		return eachContainer(s, func(c corev1.Container, _ *corev1.SecurityContext) bool {
			return !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.HostPort != 0 })
		})
	}},
	{"baseline: AppArmor", func(s *corev1.PodSpec) string {
		ok := func(p *corev1.AppArmorProfile) bool {
			return p == nil || p.Type == corev1.AppArmorProfileTypeRuntimeDefault || p.Type == corev1.AppArmorProfileTypeLocalhost
		}
		if s.SecurityContext != nil && !ok(s.SecurityContext.AppArmorProfile) {
			return "pod AppArmor profile"
		}
		return eachContainer(s, func(c corev1.Container, sc *corev1.SecurityContext) bool { return sc == nil || ok(sc.AppArmorProfile) })
	}},
	{"baseline: SELinux", func(s *corev1.PodSpec) string {
		ok := func(o *corev1.SELinuxOptions) bool {
			return o == nil || (o.User == "" && o.Role == "" &&
				slices.Contains([]string{"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}, o.Type))
		}
		if s.SecurityContext != nil && !ok(s.SecurityContext.SELinuxOptions) {
			return "pod SELinux options"
		}
		return eachContainer(s, func(c corev1.Container, sc *corev1.SecurityContext) bool { return sc == nil || ok(sc.SELinuxOptions) })
	}},
	{"baseline: /proc mount type", func(s *corev1.PodSpec) string {
		return eachContainer(s, func(c corev1.Container, sc *corev1.SecurityContext) bool {
			return sc == nil || sc.ProcMount == nil || *sc.ProcMount == corev1.DefaultProcMount
		})
	}},
	{"baseline: sysctls", func(s *corev1.PodSpec) string {
		safe := []string{"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
			"net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
			"net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"}
		if s.SecurityContext != nil {
			for _, sc := range s.SecurityContext.Sysctls {
				if !slices.Contains(safe, sc.Name) {
					return "sysctl " + sc.Name
				}
			}
		}
		return ""
	}},
	{"restricted: volume types", func(s *corev1.PodSpec) string {
		for _, v := range s.Volumes {
			vs := v.VolumeSource
			if vs.ConfigMap == nil && vs.CSI == nil && vs.DownwardAPI == nil && vs.EmptyDir == nil && vs.Ephemeral == nil &&
				vs.PersistentVolumeClaim == nil && vs.Projected == nil && vs.Secret == nil {
				return "volume " + v.Name + " is of a type restricted forbids"
			}
		}
		return ""
	}},
	{"restricted: privilege escalation", func(s *corev1.PodSpec) string {
		return eachContainer(s, func(c corev1.Container, sc *corev1.SecurityContext) bool {
			return sc != nil && sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation
		})
	}},
	{"restricted: running as non-root", func(s *corev1.PodSpec) string {
		pod := s.SecurityContext != nil && s.SecurityContext.RunAsNonRoot != nil && *s.SecurityContext.RunAsNonRoot
		return eachContainer(s, func(c corev1.Container, sc *corev1.SecurityContext) bool {
			if sc != nil && sc.RunAsNonRoot != nil {
				return *sc.RunAsNonRoot
			}
			return pod
		})
	}},
	{"restricted: running as non-root user", func(s *corev1.PodSpec) string {
		if sc := s.SecurityContext; sc != nil && sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			return "pod runAsUser 0"
		}
		return eachContainer(s, func(c corev1.Container, sc *corev1.SecurityContext) bool {
			return sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 0
		})
	}},
	{"restricted: seccomp", func(s *corev1.PodSpec) string {
		ok := func(p *corev1.SeccompProfile) bool {
			return p != nil && (p.Type == corev1.SeccompProfileTypeRuntimeDefault || p.Type == corev1.SeccompProfileTypeLocalhost)
		}
		if s.SecurityContext != nil && s.SecurityContext.SeccompProfile != nil && !ok(s.SecurityContext.SeccompProfile) {
			return "pod seccomp profile " + string(s.SecurityContext.SeccompProfile.Type)
		}
		pod := s.SecurityContext != nil && ok(s.SecurityContext.SeccompProfile)
		return eachContainer(s, func(c corev1.Container, sc *corev1.SecurityContext) bool {
			if sc != nil && sc.SeccompProfile != nil {
				return ok(sc.SeccompProfile)
			}
			return pod
		})
	}},
	{"restricted: capabilities", func(s *corev1.PodSpec) string {
		return eachContainer(s, func(c corev1.Container, sc *corev1.SecurityContext) bool {
			if sc == nil || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
				return false
			}
			return !slices.ContainsFunc(sc.Capabilities.Add, func(c corev1.Capability) bool { return c != "NET_BIND_SERVICE" })
		})
	}},
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
// Standard, and more than it asks: a read-only root filesystem everywhere
// (writable folders are emptyDirs or volumes).
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
				for _, r := range restrictedRules {
					if why := r.check(spec); why != "" {
						t.Errorf("%s breaks %s: %s", name, r.name, why)
					}
				}
				if why := eachContainer(spec, func(c corev1.Container, sc *corev1.SecurityContext) bool {
					return sc != nil && sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem
				}); why != "" {
					t.Errorf("%s: %s has a writable root filesystem", name, why)
				}
			}
			if n < 2 {
				t.Fatalf("%s: %d workloads built; want the control plane and the node at least", dir, n)
			}
		})
	}
}

// The rules catch what they are for: the node DaemonSet as it was (a
// hostPath, a root init container with CHOWN) breaks them.
func TestPodSecurityRulesRefuse(t *testing.T) {
	root, yes, no := int64(0), true, false
	bad := &corev1.PodSpec{
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/cast-node"}}}},
		InitContainers: []corev1.Container{{Name: "own-data", SecurityContext: &corev1.SecurityContext{
			RunAsUser: &root, RunAsNonRoot: &no, AllowPrivilegeEscalation: &yes,
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"CHOWN", "FOWNER"}}}}},
		Containers: []corev1.Container{{Name: "node"}},
	}
	broken := map[string]bool{}
	for _, r := range restrictedRules {
		if why := r.check(bad); why != "" {
			broken[r.name] = true
		}
	}
	for _, want := range []string{"baseline: hostPath volumes", "restricted: volume types", "restricted: privilege escalation",
		"restricted: running as non-root", "restricted: running as non-root user", "restricted: seccomp", "restricted: capabilities"} {
		if !broken[want] {
			t.Errorf("%s did not refuse the old node DaemonSet's pod (broken: %v)", want, fmt.Sprint(broken))
		}
	}
}
