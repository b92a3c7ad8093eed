package kube

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/cast-dev/cast/internal/errs"
)

// meta is an object's metadata as the API spells it.
type meta struct {
	Name            string            `json:"name"`
	Namespace       string            `json:"namespace,omitempty"`
	ResourceVersion string            `json:"resourceVersion,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
}

// A Secret's data is base64 on the wire ([]byte in JSON), a ConfigMap's
// plain strings.
type secret struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   meta              `json:"metadata"`
	Type       string            `json:"type,omitempty"`
	Data       map[string][]byte `json:"data,omitempty"`
}

type configMap struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   meta              `json:"metadata"`
	Data       map[string]string `json:"data,omitempty"`
}

func encode(kind Kind, ns string, o Object) ([]byte, error) {
	m := meta{Name: o.Name, Namespace: ns, ResourceVersion: o.ResourceVersion, Labels: o.Labels}
	switch kind {
	case Secrets:
		data := make(map[string][]byte, len(o.Data))
		for k, v := range o.Data {
			data[k] = []byte(v)
		}
		return json.Marshal(secret{APIVersion: "v1", Kind: "Secret", Metadata: m, Type: "Opaque", Data: data})
	case ConfigMaps:
		return json.Marshal(configMap{APIVersion: "v1", Kind: "ConfigMap", Metadata: m, Data: o.Data})
	}
	return nil, fmt.Errorf("kube: no codec for %s", kind)
}

func decode(kind Kind, b []byte) (Object, error) {
	switch kind {
	case Secrets:
		var s secret
		if err := json.Unmarshal(b, &s); err != nil {
			return Object{}, fmt.Errorf("kube: a Secret that does not decode: %w", err)
		}
		data := make(map[string]string, len(s.Data))
		for k, v := range s.Data {
			data[k] = string(v)
		}
		return Object{Name: s.Metadata.Name, ResourceVersion: s.Metadata.ResourceVersion, Labels: s.Metadata.Labels, Data: data}, nil
	case ConfigMaps:
		var c configMap
		if err := json.Unmarshal(b, &c); err != nil {
			return Object{}, fmt.Errorf("kube: a ConfigMap that does not decode: %w", err)
		}
		return Object{Name: c.Metadata.Name, ResourceVersion: c.Metadata.ResourceVersion, Labels: c.Metadata.Labels, Data: c.Data}, nil
	}
	return Object{}, fmt.Errorf("kube: no codec for %s", kind)
}

// Status is the API server's error reply (metav1.Status), as the fake
// server in kubetest writes it too.
type Status struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Status     string `json:"status"`
	Message    string `json:"message"`
	Reason     string `json:"reason"`
	Code       int    `json:"code"`
}

// statusError maps a refusal to an errs kind by the Status's reason
// (a 409 is AlreadyExists on create and Conflict on update).
func statusError(method, path string, code int, body []byte) error {
	var st Status
	_ = json.Unmarshal(body, &st) // a proxy's HTML error leaves it empty
	msg := st.Message
	if msg == "" {
		msg = http.StatusText(code)
	}
	kind, reason := errs.KindUnavailable, errs.ReasonUnavailable
	switch {
	case code == http.StatusNotFound:
		kind, reason = errs.KindNotFound, errs.ReasonNotFound
	case st.Reason == "AlreadyExists":
		kind, reason = errs.KindAlreadyExists, errs.ReasonAlreadyExists
	case code == http.StatusConflict:
		kind, reason = errs.KindAborted, errs.ReasonConflict
	case code == http.StatusUnauthorized:
		kind, reason = errs.KindUnauthenticated, errs.ReasonUnauthenticated
	case code == http.StatusForbidden:
		kind, reason = errs.KindPermissionDenied, errs.ReasonPermissionDenied
	case code/100 == 4:
		kind, reason = errs.KindInvalid, errs.ReasonInvalidArgument
	}
	return errs.New(kind, reason, "kube: %s %s: %d %s", method, path, code, msg)
}

// Is reports whether err is a kube refusal of kind k.
func Is(err error, k errs.Kind) bool {
	e, ok := errs.As(err)
	return ok && e.Kind == k
}
