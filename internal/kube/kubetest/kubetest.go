// Package kubetest is a stand-in for the Kubernetes API server in tests:
// Secrets and ConfigMaps of one namespace over HTTPS, a bearer token, the
// API's create/update semantics (AlreadyExists, resourceVersion
// conflicts) and RBAC rules as a Role states them. A real API server takes
// minutes to build on 2 cores, past the default run's budget (`make
// test-k8s` builds kube-apiserver and installs every overlay into it;
// docs/install-kubernetes.md), so this is what internal/kube and the
// bootstrap are tested against in the default run; it follows the API
// where cast depends on it and nowhere else.
package kubetest

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/cast-dev/cast/internal/kube"
	"github.com/cast-dev/cast/internal/pki"
)

// Server holds the objects of one namespace.
type Server struct {
	Namespace string
	srv       *httptest.Server
	token     string
	caPEM     []byte
	rules     []rbacv1.PolicyRule // nil: everything allowed

	mu       sync.Mutex
	objects  map[string]json.RawMessage // kind/name -> the object as stored
	rv       int
	calls    []string // "verb kind/name" of the authorized, in order
	requests int
}

// New starts a server for namespace ns whose callers hold the
// service-account token token; rules (a Role's) limit what they may do,
// nil allows everything.
func New(t testing.TB, ns string, rules []rbacv1.PolicyRule) *Server {
	s := &Server{Namespace: ns, token: "sa-token-" + ns, rules: rules, objects: map[string]json.RawMessage{}}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	// A CA of its own (httptest's certificate is the same for every
	// server): a client trusting another server's CA must fail.
	caPEM, caKey, err := pki.NewNamedCA("kubetest API server CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.LoadCA(caPEM, caKey)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Leaf("kubernetes", []string{"127.0.0.1", "localhost"}, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	s.caPEM = caPEM
	s.srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	s.srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are what some tests want
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	return s
}

// Config is a kube.Config for the server, with the token and CA written
// under dir, as the kubelet mounts them.
func (s *Server) Config(t testing.TB) kube.Config {
	dir := t.TempDir()
	tok, ca := filepath.Join(dir, "token"), filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(tok, []byte(s.token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ca, s.caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return kube.Config{Host: s.srv.URL, Namespace: s.Namespace, TokenFile: tok, CAFile: ca}
}

// Client is a kube.Client for the server.
func (s *Server) Client(t testing.TB) *kube.Client {
	c, err := kube.New(s.Config(t))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Put stores obj as another writer would (no RBAC), bumping its version.
func (s *Server) Put(t testing.TB, kind kube.Kind, obj map[string]any) {
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	name := obj["metadata"].(map[string]any)["name"].(string)
	if _, err := s.store(string(kind)+"/"+name, b); err != nil {
		t.Fatal(err)
	}
}

// Raw is the stored JSON of kind/name, nil if absent.
func (s *Server) Raw(kind kube.Kind, name string) json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.objects[string(kind)+"/"+name]
}

// Calls lists the requests served so far as "verb kind/name".
func (s *Server) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// Requests counts every request that reached the server, refused or not.
func (s *Server) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests++
	s.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+s.token {
		writeStatus(w, http.StatusUnauthorized, "Unauthorized", "Unauthorized")
		return
	}
	prefix := "/api/v1/namespaces/" + s.Namespace + "/"
	rest, ok := strings.CutPrefix(r.URL.Path, prefix)
	if !ok {
		writeStatus(w, http.StatusForbidden, "Forbidden", "outside namespace "+s.Namespace+": "+r.URL.Path)
		return
	}
	kind, name, _ := strings.Cut(rest, "/")
	verb := map[string]string{http.MethodGet: "get", http.MethodPost: "create", http.MethodPut: "update"}[r.Method]
	if verb == "" || (verb == "create") != (name == "") {
		writeStatus(w, http.StatusMethodNotAllowed, "MethodNotAllowed", r.Method+" "+r.URL.Path)
		return
	}
	// RBAC authorizes create before the body is read: a rule naming
	// resources never matches it.
	if !s.allowed(verb, kind, name) {
		writeStatus(w, http.StatusForbidden, "Forbidden", kind+" "+strconv.Quote(name)+" is forbidden: cannot "+verb)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	body, _ := io.ReadAll(r.Body)
	if verb == "create" {
		var m struct {
			Metadata struct{ Name string } `json:"metadata"`
		}
		_ = json.Unmarshal(body, &m)
		name = m.Metadata.Name
	}
	s.calls = append(s.calls, verb+" "+kind+"/"+name)
	key := kind + "/" + name
	cur, exists := s.objects[key]
	switch {
	case verb == "get" && !exists, verb == "update" && !exists:
		writeStatus(w, http.StatusNotFound, "NotFound", kind+" "+strconv.Quote(name)+" not found")
		return
	case verb == "get":
		writeJSON(w, http.StatusOK, cur)
		return
	case verb == "create" && exists:
		writeStatus(w, http.StatusConflict, "AlreadyExists", kind+" "+strconv.Quote(name)+" already exists")
		return
	case verb == "update" && rvOf(cur) != rvOf(body):
		writeStatus(w, http.StatusConflict, "Conflict", "Operation cannot be fulfilled on "+kind+" "+strconv.Quote(name)+": the object has been modified")
		return
	}
	stored, err := s.store(key, body)
	if err != nil {
		writeStatus(w, http.StatusBadRequest, "BadRequest", err.Error())
		return
	}
	writeJSON(w, map[bool]int{true: http.StatusCreated, false: http.StatusOK}[verb == "create"], stored)
}

// store keeps body under key with the next resourceVersion.
func (s *Server) store(key string, body []byte) (json.RawMessage, error) {
	var obj map[string]any
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, err
	}
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		obj["metadata"] = md
	}
	s.rv++
	md["resourceVersion"] = strconv.Itoa(s.rv)
	md["namespace"] = s.Namespace
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	s.objects[key] = b
	return b, nil
}

func (s *Server) allowed(verb, kind, name string) bool {
	if s.rules == nil {
		return true
	}
	for _, r := range s.rules {
		if slices.Contains(r.APIGroups, "") && slices.Contains(r.Resources, kind) && slices.Contains(r.Verbs, verb) &&
			(len(r.ResourceNames) == 0 || (name != "" && slices.Contains(r.ResourceNames, name))) {
			return true
		}
	}
	return false
}

func rvOf(b []byte) string {
	var m struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(b, &m)
	return m.Metadata.ResourceVersion
}

func writeStatus(w http.ResponseWriter, code int, reason, msg string) {
	b, _ := json.Marshal(kube.Status{APIVersion: "v1", Kind: "Status", Status: "Failure", Message: msg, Reason: reason, Code: code})
	writeJSON(w, code, b)
}

func writeJSON(w http.ResponseWriter, code int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// RoleRules are the rules of the Role named name in the multi-document
// manifest at path (deploy/k8s/base/rbac.yaml): tests run cast's code
// under the very Role an install grants it.
func RoleRules(t testing.TB, path, name string) []rbacv1.PolicyRule {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var role rbacv1.Role
		if err := yaml.UnmarshalStrict([]byte(doc), &role); err != nil {
			continue // another kind
		}
		if role.Kind == "Role" && role.Name == name {
			return role.Rules
		}
	}
	t.Fatalf("%s has no Role %s", path, name)
	return nil
}
