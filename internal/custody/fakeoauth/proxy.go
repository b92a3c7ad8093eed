package fakeoauth

import (
	"bufio"
	"crypto/tls"
	"errors"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/pki"
)

// ClaudeTokenHost is where Claude Code 2.1.197 posts its refresh
// (https://platform.claude.com/v1/oauth/token). Its CLAUDE_CODE_CUSTOM_OAUTH_URL
// takes only Anthropic URLs, so a test reaches the CLI's refresh through an
// HTTPS proxy instead (docs/token-custody.md).
const ClaudeTokenHost = "platform.claude.com"

// Proxy is an HTTPS proxy on 127.0.0.1 that stands in for a vendor's
// token host: it answers CONNECT only for the hosts it was given (port
// 443), terminates TLS there with a certificate from a throwaway CA and
// serves the fake provider's token endpoint. Every other CONNECT or plain
// proxy request is logged and refused; it never dials out.
type Proxy struct {
	URL    string // http://127.0.0.1:port, for HTTPS_PROXY
	CAFile string // the test CA (PEM), for NODE_EXTRA_CA_CERTS / SSL_CERT_FILE

	hosts map[string]bool
	tls   *tls.Config
	conns chan net.Conn
	done  chan struct{}

	mu  sync.Mutex
	log []string
}

// Proxy starts an HTTPS proxy serving s's token endpoint for hosts (e.g.
// ClaudeTokenHost) until the test ends.
func (s *Server) Proxy(t testing.TB, hosts ...string) *Proxy {
	t.Helper()
	certPEM, keyDER, err := pki.NewCA(time.Hour)
	if err != nil {
		t.Fatalf("fakeoauth proxy: %v", err)
	}
	ca, err := pki.LoadCA(certPEM, keyDER)
	if err != nil {
		t.Fatalf("fakeoauth proxy: %v", err)
	}
	cert, err := ca.ServerCert(hosts, time.Hour)
	if err != nil {
		t.Fatalf("fakeoauth proxy: %v", err)
	}
	p := &Proxy{
		CAFile: filepath.Join(t.TempDir(), "test-ca.pem"),
		hosts:  map[string]bool{},
		tls:    &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12},
		conns:  make(chan net.Conn),
		done:   make(chan struct{}),
	}
	for _, h := range hosts {
		p.hosts[h+":443"] = true
	}
	if err := os.WriteFile(p.CAFile, certPEM, 0o600); err != nil {
		t.Fatalf("fakeoauth proxy: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("fakeoauth proxy: %v", err)
	}
	p.URL = "http://" + ln.Addr().String()
	front := &http.Server{Handler: http.HandlerFunc(p.serveProxy), ReadHeaderTimeout: 5 * time.Second}
	// Claude opens a tunnel at start and may drop it before the TLS
	// handshake; such errors go to the log, not to stderr.
	inner := &http.Server{Handler: p.inner(s), ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(logWriter{p}, "", 0)}
	go func() { _ = front.Serve(ln) }()
	go func() { _ = inner.Serve(chanListener{p}) }()
	t.Cleanup(func() {
		close(p.done)
		_ = front.Close()
		_ = inner.Close()
	})
	return p
}

// Log is every request the proxy saw, in order: "CONNECT host:port",
// "REFUSED ..." and, inside an accepted tunnel, "METHOD host/path".
func (p *Proxy) Log() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.log...)
}

func (p *Proxy) record(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = append(p.log, line)
}

// Env is what a CLI needs to reach the fake through the proxy: the
// proxy for HTTPS, and the test CA added to its trusted roots (Node's and
// Bun's NODE_EXTRA_CA_CERTS). Requests to 127.0.0.1 bypass the proxy.
func (p *Proxy) Env() []string {
	return []string{"HTTPS_PROXY=" + p.URL, "https_proxy=" + p.URL,
		"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost", "NODE_EXTRA_CA_CERTS=" + p.CAFile}
}

func (p *Proxy) serveProxy(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect || !p.hosts[r.Host] {
		p.record("REFUSED " + r.Method + " " + r.Host + r.URL.Path)
		http.Error(w, "this test proxy serves only the fake token endpoint", http.StatusForbidden)
		return
	}
	p.record("CONNECT " + r.Host)
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "no hijack", http.StatusInternalServerError)
		return
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		return
	}
	if _, err := rw.WriteString("HTTP/1.1 200 Connection established\r\n\r\n"); err != nil || rw.Flush() != nil {
		_ = conn.Close()
		return
	}
	// Bytes the client sent after CONNECT (its TLS hello) may be buffered.
	c := net.Conn(conn)
	if n := rw.Reader.Buffered(); n > 0 {
		c = bufferedConn{Conn: conn, r: rw.Reader}
	}
	select {
	case p.conns <- tls.Server(c, p.tls):
	case <-p.done:
		_ = conn.Close()
	}
}

// inner serves the tunnelled requests: the token endpoint, nothing else.
func (p *Proxy) inner(s *Server) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.record(r.Method + " " + r.Host + r.URL.Path)
		if !strings.HasSuffix(r.URL.Path, "/oauth/token") {
			http.Error(w, "not served by the fake provider", http.StatusNotFound)
			return
		}
		s.serveToken(w, r)
	})
}

type logWriter struct{ p *Proxy }

func (w logWriter) Write(b []byte) (int, error) {
	w.p.record("ERROR " + strings.TrimSpace(string(b)))
	return len(b), nil
}

type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// chanListener hands the inner server the tunnels' TLS connections.
type chanListener struct{ p *Proxy }

func (l chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.p.conns:
		return c, nil
	case <-l.p.done:
		return nil, errors.New("fakeoauth proxy closed")
	}
}
func (l chanListener) Close() error   { return nil }
func (l chanListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
