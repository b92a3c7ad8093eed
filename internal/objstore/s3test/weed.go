package s3test

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/cast-dev/cast/internal/objstore"
	"github.com/cast-dev/cast/internal/testharness"
)

// startWeed runs `weed server -s3` (master, volume server, filer and S3
// gateway in one process) on the server's folder and ports, and waits
// until an object round-trips through it: the gateway listens before the
// volume server has registered, and a write before that fails. No S3
// identities are configured, so SeaweedFS takes any credentials.
func (s *Server) startWeed(bin string) error {
	if err := os.MkdirAll(s.cfg.Dir, 0o700); err != nil {
		return err
	}
	w := s.cfg.Weed
	p, _ := s.proc.Start(func() (*testharness.Proc, error) {
		return testharness.StartProc(s.t, bin, "server", "-dir="+s.cfg.Dir, "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
			"-master.port="+w[0], "-master.port.grpc="+w[1], "-volume.port="+w[2], "-volume.port.grpc="+w[3],
			"-filer.port="+w[4], "-filer.port.grpc="+w[5], "-s3", "-s3.port="+port(s.cfg.Addr), "-s3.port.grpc="+w[6],
			"-s3.port.iceberg=0", "-s3.port.lance=0", "-master.volumeSizeLimitMB=64", "-volume.max=0"), nil
	})
	deadline := time.Now().Add(90 * time.Second)
	for {
		err := s.probe()
		if err == nil {
			return nil
		}
		if _, exited := p.Wait(200 * time.Millisecond); exited || time.Now().After(deadline) {
			return fmt.Errorf("weed server did not serve S3 (exited %v): %v\n%s", exited, err, p.Output())
		}
	}
}

// probe writes, reads and deletes one object.
func (s *Server) probe() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := objstore.NewS3(ctx, s.Config())
	if err != nil {
		return err
	}
	if err := b.Put(ctx, "probe", []byte("ok")); err != nil {
		return err
	}
	if _, err := b.Get(ctx, "probe"); err != nil {
		return err
	}
	return b.Delete(ctx, "probe")
}

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}
