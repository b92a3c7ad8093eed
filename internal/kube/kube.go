// Package kube is the little of the Kubernetes API cast uses inside a
// cluster: get, create and replace a Secret or ConfigMap in the pod's own
// namespace, over HTTPS with the pod's service-account token. It is plain
// net/http rather than client-go: three calls on two kinds do not justify
// client-go's module graph in the control plane's binary.
package kube

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/cast-dev/cast/internal/errs"
)

// Kind is an API resource cast writes, as its URL path names it.
type Kind string

// The kinds cast reads and writes.
const (
	Secrets    Kind = "secrets"
	ConfigMaps Kind = "configmaps"
)

// Object is a Secret or a ConfigMap: the fields cast reads and writes.
// Data holds plain values for both (a Secret's are base64 on the wire).
type Object struct {
	Name            string
	ResourceVersion string // "" on create; Update needs the one read
	Labels          map[string]string
	Data            map[string]string
}

// ServiceAccountDir is where the kubelet mounts a pod's service-account
// token, the cluster's CA and the pod's namespace.
const ServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// Config says how to reach the API server.
type Config struct {
	Host      string // https://host:port
	Namespace string
	TokenFile string // re-read on every call: the kubelet rotates projected tokens
	CAFile    string // PEM bundle that verifies the API server
	Timeout   time.Duration
}

// InCluster is the Client of a pod: its own namespace, with its service
// account (inClusterConfig).
func InCluster() (*Client, error) {
	cfg, err := inClusterConfig()
	if err != nil {
		return nil, err
	}
	return New(cfg)
}

// inClusterConfig is the Config of a pod: the API server from the
// environment the kubelet sets, the rest from the service-account mount.
func inClusterConfig() (Config, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return Config{}, fmt.Errorf("kube: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set: not in a pod")
	}
	ns, err := os.ReadFile(ServiceAccountDir + "/namespace")
	if err != nil {
		return Config{}, fmt.Errorf("kube: the pod's namespace: %w (is automountServiceAccountToken off?)", err)
	}
	return Config{
		Host: "https://" + net.JoinHostPort(host, port), Namespace: strings.TrimSpace(string(ns)),
		TokenFile: ServiceAccountDir + "/token", CAFile: ServiceAccountDir + "/ca.crt",
		Timeout: 30 * time.Second,
	}, nil
}

// Validate checks c.
func (c Config) Validate() error {
	if u, err := url.Parse(c.Host); err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("kube: API server %q is not an https:// URL", c.Host)
	}
	if c.Namespace == "" || c.TokenFile == "" || c.CAFile == "" {
		return fmt.Errorf("kube: a namespace, a token file and a CA file are needed")
	}
	return nil
}

// Client calls one namespace of one API server.
type Client struct {
	cfg Config
	hc  *http.Client
}

// New makes a Client; the CA file is read now, the token at every call.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("kube: API server CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("kube: %s holds no PEM certificate", cfg.CAFile)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	return &Client{cfg: cfg, hc: &http.Client{Transport: tr, Timeout: cfg.Timeout}}, nil
}

// Namespace is the namespace every call goes to.
func (c *Client) Namespace() string { return c.cfg.Namespace }

// Get reads kind/name; a missing object is errs.KindNotFound.
func (c *Client) Get(ctx context.Context, kind Kind, name string) (Object, error) {
	return c.do(ctx, http.MethodGet, kind, name, nil)
}

// Create writes obj as a new object; one already there is
// errs.KindAlreadyExists.
func (c *Client) Create(ctx context.Context, kind Kind, obj Object) (Object, error) {
	obj.ResourceVersion = ""
	return c.do(ctx, http.MethodPost, kind, "", &obj)
}

// Update replaces obj, which must carry the ResourceVersion it was read
// at: a write since is errs.KindAborted (read again and decide again).
func (c *Client) Update(ctx context.Context, kind Kind, obj Object) (Object, error) {
	if obj.ResourceVersion == "" {
		return Object{}, errs.Invalid("kube: update %s %s without the resourceVersion it was read at", kind, obj.Name)
	}
	return c.do(ctx, http.MethodPut, kind, obj.Name, &obj)
}

func (c *Client) do(ctx context.Context, method string, kind Kind, name string, obj *Object) (Object, error) {
	path := "/api/v1/namespaces/" + url.PathEscape(c.cfg.Namespace) + "/" + string(kind)
	if name != "" {
		path += "/" + url.PathEscape(name)
	}
	var body io.Reader
	if obj != nil {
		b, err := encode(kind, c.cfg.Namespace, *obj)
		if err != nil {
			return Object{}, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.cfg.Host+path, body)
	if err != nil {
		return Object{}, err
	}
	tok, err := os.ReadFile(c.cfg.TokenFile)
	if err != nil {
		return Object{}, fmt.Errorf("kube: service-account token: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return Object{}, errs.New(errs.KindUnavailable, errs.ReasonUnavailable, "kube: %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return Object{}, errs.New(errs.KindUnavailable, errs.ReasonUnavailable, "kube: %s %s: %v", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return Object{}, statusError(method, path, resp.StatusCode, b)
	}
	return decode(kind, b)
}

// maxBody bounds a reply: a Secret or ConfigMap is at most 1 MiB.
const maxBody = 4 << 20
