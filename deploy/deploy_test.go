// Package deploy_test checks the deployment files: the kustomization
// builds, and every object it yields decodes strictly into its
// Kubernetes API type (a misspelt or misplaced field fails).
package deploy_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// kinds are the API types the manifests may hold; an object of another
// kind fails the test until its type is added here.
var kinds = map[string]func() any{
	"apps/v1/StatefulSet": func() any { return &appsv1.StatefulSet{} },
	"apps/v1/Deployment":  func() any { return &appsv1.Deployment{} },
	"apps/v1/DaemonSet":   func() any { return &appsv1.DaemonSet{} },
	"v1/Service":          func() any { return &corev1.Service{} },
	"v1/ConfigMap":        func() any { return &corev1.ConfigMap{} },
}

// `kubectl apply -k deploy/k8s` works: the kustomization builds, lists
// every manifest in the folder, and ships the alert rules as the ConfigMap
// cast-alerts (not as a raw manifest, which apply cannot read).
func TestKustomizeBuilds(t *testing.T) {
	dir := "k8s"
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	names := map[string]bool{}
	for _, r := range res.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		key := r.GetApiVersion() + "/" + r.GetKind()
		mk, ok := kinds[key]
		if !ok {
			t.Errorf("%s %s: no API type to check it against", key, r.GetName())
			continue
		}
		obj := mk()
		if err := yaml.UnmarshalStrict(b, obj); err != nil {
			t.Errorf("%s %s does not decode strictly: %v", key, r.GetName(), err)
		}
		names[r.GetKind()+"/"+r.GetName()] = true
		if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Name == "cast-alerts" {
			want, err := os.ReadFile(filepath.Join(dir, "cast-alerts.rules.yml"))
			if err != nil {
				t.Fatal(err)
			}
			if cm.Data["cast-alerts.rules.yml"] != string(want) {
				t.Errorf("ConfigMap cast-alerts does not hold cast-alerts.rules.yml")
			}
		}
	}
	for _, want := range []string{"StatefulSet/cast-controlplane", "Service/cast-controlplane", "StatefulSet/cast-node", "ConfigMap/cast-alerts"} {
		if !names[want] {
			t.Errorf("the build lacks %s (has %v)", want, names)
		}
	}
	// Every manifest in the folder is in the kustomization.
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
			t.Errorf("%s is not listed in kustomization.yaml", base)
		}
	}
	for _, r := range k.Resources {
		if strings.HasSuffix(r, ".yml") {
			t.Errorf("%s is a resource; rule files go in the ConfigMap", r)
		}
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
