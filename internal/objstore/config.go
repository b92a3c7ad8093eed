package objstore

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"
)

// Environment variables an S3 service's credentials may come from when no
// credentials file is named.
const (
	EnvAccessKeyID     = "CAST_S3_ACCESS_KEY_ID"
	EnvSecretAccessKey = "CAST_S3_SECRET_ACCESS_KEY"
)

// Creds is an S3 access key. Its String never shows the secret, so a
// config logged by mistake does not leak it.
type Creds struct {
	AccessKeyID     string
	SecretAccessKey string
}

func (c Creds) String() string { return "Creds{" + c.AccessKeyID + ", secret redacted}" }

// S3Config names an S3-compatible service and bucket.
type S3Config struct {
	Endpoint string // http(s)://host:port
	Bucket   string
	Region   string // default us-east-1
	Prefix   string // keys are stored under it ("" or ending in /)
	Creds    Creds
}

// Validate checks c.
func (c S3Config) Validate() error {
	u, err := url.Parse(c.Endpoint)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/"):
		return fmt.Errorf("objstore: endpoint %q must be http(s)://host[:port]", c.Endpoint)
	case c.Bucket == "":
		return fmt.Errorf("objstore: bucket is empty")
	case c.Prefix != "" && !strings.HasSuffix(c.Prefix, "/"):
		return fmt.Errorf("objstore: prefix %q must end with /", c.Prefix)
	case c.Creds.AccessKeyID == "" || c.Creds.SecretAccessKey == "":
		return fmt.Errorf("objstore: no S3 credentials (a credentials file, or %s and %s)", EnvAccessKeyID, EnvSecretAccessKey)
	}
	return nil
}

// LoadCreds reads an access key from path (two lines: the key id, then the
// secret; the file must not be readable by others) or, when path is "",
// from EnvAccessKeyID and EnvSecretAccessKey.
func LoadCreds(path string) (Creds, error) {
	if path == "" {
		return Creds{AccessKeyID: os.Getenv(EnvAccessKeyID), SecretAccessKey: os.Getenv(EnvSecretAccessKey)}, nil
	}
	info, err := os.Stat(path)
	if err != nil {
		return Creds{}, fmt.Errorf("objstore: credentials file: %w", err)
	}
	if info.Mode().Perm()&0o077 != 0 {
		return Creds{}, fmt.Errorf("objstore: credentials file %s is readable by others (mode %v); chmod 600 it", path, info.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Creds{}, fmt.Errorf("objstore: credentials file: %w", err)
	}
	lines := strings.Fields(string(b))
	if len(lines) != 2 {
		return Creds{}, fmt.Errorf("objstore: credentials file %s must hold two lines: key id, then secret", path)
	}
	return Creds{AccessKeyID: lines[0], SecretAccessKey: lines[1]}, nil
}

// Config picks the object store: an S3 service when Endpoint is set, else
// a folder.
type Config struct {
	Folder string
	S3     S3Config
}

// Bucket is what Open returns: either implementation.
type Bucket interface {
	Put(ctx context.Context, key string, data []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
	Delete(ctx context.Context, key string) error
	List(ctx context.Context, prefix string, fn func(key string, modified time.Time) error) error
}

// Open opens the store c names.
func Open(ctx context.Context, c Config) (Bucket, error) {
	if c.S3.Endpoint != "" {
		return NewS3(ctx, c.S3)
	}
	return NewFolder(c.Folder)
}
