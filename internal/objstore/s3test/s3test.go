// Package s3test runs a real S3-compatible server (gofakes3 over files
// in a folder) in a process of its own, the test binary run again as it, so a
// test can kill -9 it and start it again on the same data and port. With
// CAST_S3_SERVER naming a SeaweedFS `weed` binary (`make test-s3` builds
// one), the server is `weed server -s3` instead, on a folder and ports of
// its own, killed and restarted alike.
package s3test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3afero"
	"github.com/spf13/afero"

	"github.com/cast-dev/cast/internal/objstore"
	"github.com/cast-dev/cast/internal/testharness"
)

// serveEnv carries a server's config to the test binary run as one.
const serveEnv = "CAST_TEST_S3_SERVE"

// readyLine is what a server process prints once it listens.
const readyLine = "cast test s3 server ready"

// Bucket is the bucket tests use.
const Bucket = "cast-test"

// ServerEnv names a SeaweedFS `weed` binary to run instead of gofakes3.
const ServerEnv = "CAST_S3_SERVER"

type serveConfig struct {
	Dir  string
	Addr string
	Weed []string `json:"-"` // weed's own ports, when ServerEnv is set
}

// RunIfAsked makes the calling test binary an S3 server when Start
// started it as one: it serves until killed and never returns. Otherwise
// it returns at once. Call it first in TestMain.
func RunIfAsked() {
	c, ok := testharness.SelfConfig[serveConfig](serveEnv, "s3 server")
	if !ok {
		return
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		fmt.Fprintln(os.Stderr, "s3 server dir:", err)
		os.Exit(1)
	}
	backend, err := s3afero.MultiBucket(afero.NewBasePathFs(afero.NewOsFs(), c.Dir))
	if err != nil {
		fmt.Fprintln(os.Stderr, "s3 server backend:", err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "s3 server listen:", err)
		os.Exit(1)
	}
	fmt.Println(readyLine)
	srv := &http.Server{Handler: gofakes3.New(backend, gofakes3.WithAutoBucket(true)).Server(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintln(os.Stderr, "s3 server:", srv.Serve(ln))
	os.Exit(1)
}

// Server is an S3 server process on a fixed loopback port and a folder
// that outlive it.
type Server struct {
	Endpoint string // http://127.0.0.1:port
	t        testing.TB
	cfg      serveConfig
	proc     testharness.Slot[*testharness.Proc]
}

// Start starts a server and waits until it listens. The test binary's
// TestMain must call RunIfAsked.
func Start(t testing.TB) *Server {
	t.Helper()
	addr := testharness.FreeAddr(t)
	s := &Server{Endpoint: "http://" + addr, t: t, cfg: serveConfig{Dir: filepath.Join(t.TempDir(), "s3"), Addr: addr}}
	if os.Getenv(ServerEnv) != "" {
		for range 7 { // master, volume, filer: http and grpc; s3's grpc
			s.cfg.Weed = append(s.cfg.Weed, port(testharness.FreeAddr(t)))
		}
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	return s
}

// Start starts a killed server again on its folder and port.
func (s *Server) Start() error {
	if weed := os.Getenv(ServerEnv); weed != "" {
		return s.startWeed(weed)
	}
	p, _ := s.proc.Start(func() (*testharness.Proc, error) { return testharness.StartSelf(s.t, serveEnv, s.cfg), nil })
	return p.AwaitLine(readyLine, "s3 server", 30*time.Second)
}

// Kill is kill -9 of the server's process.
func (s *Server) Kill() { s.proc.Stop((*testharness.Proc).Kill) }

// Config is the objstore config of the server's test bucket.
func (s *Server) Config() objstore.S3Config {
	return objstore.S3Config{Endpoint: s.Endpoint, Bucket: Bucket, Creds: objstore.Creds{AccessKeyID: "test", SecretAccessKey: "test-secret"}}
}

// Open opens the test bucket.
func (s *Server) Open(t testing.TB) *objstore.S3 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := objstore.NewS3(ctx, s.Config())
	if err != nil {
		t.Fatal(err)
	}
	return b
}
