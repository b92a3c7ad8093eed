package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/objstore"
	"github.com/cast-dev/cast/internal/objstore/s3test"
)

func TestMain(m *testing.M) {
	s3test.RunIfAsked() // the S3 server processes are this binary
	os.Exit(m.Run())
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// contract checks what store's tiering relies on, for either store.
func contract(t *testing.T, b objstore.Bucket) {
	ctx := ctxT(t)
	if _, err := b.Get(ctx, "segments/none"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("get of a missing key = %v, want ErrNotFound", err)
	}
	for _, k := range []string{"segments/b", "segments/a", "other/c"} {
		if err := b.Put(ctx, k, []byte("v:"+k)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := b.Get(ctx, "segments/a")
	if err != nil || !bytes.Equal(got, []byte("v:segments/a")) {
		t.Fatalf("get = %q, %v", got, err)
	}
	var keys []string
	err = b.List(ctx, "segments/", func(k string, mod time.Time) error {
		if time.Since(mod) > time.Hour || time.Until(mod) > time.Hour {
			t.Errorf("%s modified %v", k, mod)
		}
		keys = append(keys, k)
		return nil
	})
	if err != nil || !slices.Equal(keys, []string{"segments/a", "segments/b"}) {
		t.Fatalf("list = %v, %v", keys, err)
	}
	if err := b.Delete(ctx, "segments/a"); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, "segments/a"); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := b.Get(ctx, "segments/a"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("get after delete = %v", err)
	}
}

func TestFolder(t *testing.T) {
	b, err := objstore.NewFolder(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	contract(t, b)
	if err := b.Put(ctxT(t), "../escape", nil); err == nil {
		t.Fatal("a key leaving the folder was taken")
	}
}

// TestFolderListSkipsWhatVanishes: an object or a whole folder deleted
// while List walks (a sweep deleting as it lists, another replica's
// purge) is skipped, and every object after it is still listed.
func TestFolderListSkipsWhatVanishes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		delete string // deleted, from the folder, when List hands out a/1
		want   []string
	}{
		{"object", "a/2", []string{"a/1", "b/1", "c/1"}},
		{"folder", "b", []string{"a/1", "a/2", "c/1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			b, err := objstore.NewFolder(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"a/1", "a/2", "b/1", "c/1"} {
				if err := b.Put(ctxT(t), k, []byte(k)); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			err = b.List(ctxT(t), "", func(key string, _ time.Time) error {
				if key == "a/1" {
					if err := os.RemoveAll(filepath.Join(dir, filepath.FromSlash(tc.delete))); err != nil {
						return err
					}
				}
				got = append(got, key)
				return nil
			})
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("List = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// TestS3 runs the contract against a real S3 server process, and checks
// an object survives the server's kill -9.
func TestS3(t *testing.T) {
	srv := s3test.Start(t)
	b := srv.Open(t)
	contract(t, b)
	srv.Kill()
	if err := b.Put(ctxT(t), "segments/down", []byte("x")); err == nil {
		t.Fatal("a put to a killed server succeeded")
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	got, err := b.Get(ctxT(t), "segments/b")
	if err != nil || string(got) != "v:segments/b" {
		t.Fatalf("after restart get = %q, %v", got, err)
	}
}

func TestS3ConfigValidate(t *testing.T) {
	ok := objstore.S3Config{Endpoint: "https://s3.example:9000", Bucket: "b", Creds: objstore.Creds{AccessKeyID: "k", SecretAccessKey: "s"}}
	for _, tc := range []struct {
		name string
		edit func(*objstore.S3Config)
		bad  bool
	}{
		{"ok", func(*objstore.S3Config) {}, false},
		{"no scheme", func(c *objstore.S3Config) { c.Endpoint = "s3.example:9000" }, true},
		{"path", func(c *objstore.S3Config) { c.Endpoint = "http://h/x" }, true},
		{"no bucket", func(c *objstore.S3Config) { c.Bucket = "" }, true},
		{"prefix without slash", func(c *objstore.S3Config) { c.Prefix = "p" }, true},
		{"no secret", func(c *objstore.S3Config) { c.Creds.SecretAccessKey = "" }, true},
	} {
		c := ok
		tc.edit(&c)
		if err := c.Validate(); (err != nil) != tc.bad {
			t.Errorf("%s: Validate = %v", tc.name, err)
		}
	}
}

func TestLoadCreds(t *testing.T) {
	p := t.TempDir() + "/creds"
	if err := os.WriteFile(p, []byte("AKID\ns3cr3t-value\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := objstore.LoadCreds(p); err == nil {
		t.Fatal("a world-readable credentials file was taken")
	}
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := objstore.LoadCreds(p)
	if err != nil || c.AccessKeyID != "AKID" || c.SecretAccessKey != "s3cr3t-value" {
		t.Fatalf("LoadCreds = %v, %v", c, err)
	}
	if s := fmt.Sprint(c); strings.Contains(s, "s3cr3t") {
		t.Fatalf("Creds prints its secret: %s", s)
	}
}
