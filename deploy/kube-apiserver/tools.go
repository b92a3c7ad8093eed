//go:build tools

// Package kubeapiserver pins a real kube-apiserver for deploy's
// TestInstallIntoAPIServer: Kubernetes 1.37.2, the release of the
// k8s.io/api and k8s.io/apimachinery in cast's go.mod. k8s.io/kubernetes
// is not meant to be a dependency: its go.mod requires its staging modules
// at v0.0.0 and replaces them with folders its module zip leaves out, so
// go.mod here replaces each with its published v0.37.2. Build it with
// `make kube-apiserver` (minutes on 2 cores). It is a module of its own so
// cast's module graph stays as it is.
package kubeapiserver

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
