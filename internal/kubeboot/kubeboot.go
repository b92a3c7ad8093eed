// Package kubeboot makes a Kubernetes install of cast one-phase: what
// used to be made by hand before and after `kubectl apply -k` is written
// into the install's namespace by cast itself, each object by name.
//
//   - Bootstrap (the Job cast-bootstrap, `controlplane k8s-bootstrap`),
//     before the control plane can start: the Secret cast-controlplane
//     (the first admin token and the secrets key) and, for the ha
//     overlay, cast-etcd-tls (etcd's CA, member and client certificates).
//     It creates what is missing and never changes what exists.
//   - Publisher (the control plane's --publish-k8s), once the control
//     plane serves: the ConfigMap cast-ca (the CA bundle Prometheus and
//     operators trust) and the Secret cast-node-join (a join token and
//     the CA pin nodes join with), the token renewed before it lapses and
//     the pin kept current through a CA rotation.
//
// The Roles in deploy/k8s grant each exactly the verbs it uses on these
// names; TestBootstrapWithinRole and TestPublisherWithinRole hold the code
// to them.
package kubeboot

import (
	"context"

	"github.com/cast-dev/cast/internal/kube"
)

// The objects cast writes into its namespace.
const (
	ControlPlaneSecret = "cast-controlplane" // admin-token, secrets-key
	EtcdTLSSecret      = "cast-etcd-tls"     // ca.crt, server.crt, server.key, client.crt, client.key
	JoinSecret         = "cast-node-join"    // join-token, ca-pin, expires
	CAConfigMap        = "cast-ca"           // ca.pem
)

// Keys of those objects, as the manifests name them.
const (
	KeyAdminToken = "admin-token"
	KeySecretsKey = "secrets-key"
	KeyJoinToken  = "join-token"
	KeyCAPin      = "ca-pin"
	KeyExpires    = "expires" // RFC 3339: when join-token lapses
	KeyCABundle   = "ca.pem"
)

// ManagedBy labels every object cast writes, so `kubectl get -l` finds them.
var managedBy = map[string]string{"app.kubernetes.io/managed-by": "cast", "app.kubernetes.io/part-of": "cast"}

// Objects is what kubeboot needs of the API (a *kube.Client).
type Objects interface {
	Namespace() string
	Get(ctx context.Context, kind kube.Kind, name string) (kube.Object, error)
	Create(ctx context.Context, kind kube.Kind, obj kube.Object) (kube.Object, error)
	Update(ctx context.Context, kind kube.Kind, obj kube.Object) (kube.Object, error)
}
