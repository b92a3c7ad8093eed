package fanout_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// compact compacts etcd's history up to its current revision.
func compact(t testing.TB, ep string) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx := ctxT(t)
	resp, err := cli.Get(ctx, "/", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, resp.Header.Revision); err != nil {
		t.Fatal(err)
	}
}
