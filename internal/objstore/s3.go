package objstore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3 keeps objects in a bucket of any service speaking the S3 API (AWS,
// MinIO, SeaweedFS, Ceph RGW, ...), through minio-go: one small module,
// path-style requests and signature v4, which every such service takes.
type S3 struct {
	cli    *minio.Client
	bucket string
	prefix string
}

// NewS3 dials c's service and makes the bucket when it is missing.
func NewS3(ctx context.Context, c S3Config) (*S3, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("objstore: endpoint: %w", err)
	}
	cli, err := minio.New(u.Host, &minio.Options{
		Creds:        credentials.NewStaticV4(c.Creds.AccessKeyID, c.Creds.SecretAccessKey, ""),
		Secure:       u.Scheme == "https",
		Region:       c.Region,
		BucketLookup: minio.BucketLookupPath,
		// A move that fails is retried whole on the next round; a few
		// tries ride out a blip without holding a round up for long.
		MaxRetries: 3,
	})
	if err != nil {
		return nil, fmt.Errorf("objstore: s3 client: %w", err)
	}
	s := &S3{cli: cli, bucket: c.Bucket, prefix: c.Prefix}
	if err := s.ensureBucket(ctx, c.Region); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *S3) ensureBucket(ctx context.Context, region string) error {
	ok, err := s.cli.BucketExists(ctx, s.bucket)
	if err != nil {
		return fmt.Errorf("objstore: bucket %s: %w", s.bucket, err)
	}
	if ok {
		return nil
	}
	err = s.cli.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{Region: region})
	if err != nil && !isCode(err, "BucketAlreadyOwnedByYou", "BucketAlreadyExists") {
		return fmt.Errorf("objstore: make bucket %s: %w", s.bucket, err)
	}
	return nil
}

func isCode(err error, codes ...string) bool {
	code := minio.ToErrorResponse(err).Code
	for _, c := range codes {
		if code == c {
			return true
		}
	}
	return false
}

// Put stores data under key (one PUT: segments are at most a few MiB).
func (s *S3) Put(ctx context.Context, key string, data []byte) error {
	_, err := s.cli.PutObject(ctx, s.bucket, s.prefix+key, bytes.NewReader(data), int64(len(data)),
		minio.PutObjectOptions{ContentType: "application/octet-stream", DisableMultipart: true})
	if err != nil {
		return fmt.Errorf("objstore: put %s: %w", key, err)
	}
	return nil
}

// readSized reads obj whole into a buffer of its stated size: a segment
// of tens of MiB read by io.ReadAll peaks near twice that while its buffer
// grows.
func readSized(obj *minio.Object) ([]byte, error) {
	info, err := obj.Stat()
	if err != nil {
		return nil, err
	}
	if info.Size < 0 {
		return io.ReadAll(obj)
	}
	b := make([]byte, info.Size)
	if _, err := io.ReadFull(obj, b); err != nil {
		return nil, err
	}
	return b, nil
}

// Get reads the object at key (ErrNotFound when there is none).
func (s *S3) Get(ctx context.Context, key string) ([]byte, error) {
	obj, err := s.cli.GetObject(ctx, s.bucket, s.prefix+key, minio.GetObjectOptions{})
	if err == nil {
		defer obj.Close()
		var b []byte
		if b, err = readSized(obj); err == nil {
			return b, nil
		}
	}
	if isCode(err, "NoSuchKey") {
		return nil, ErrNotFound
	}
	return nil, fmt.Errorf("objstore: get %s: %w", key, err)
}

// Delete removes key; a missing key is not an error (S3 says so itself).
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := s.cli.RemoveObject(ctx, s.bucket, s.prefix+key, minio.RemoveObjectOptions{}); err != nil {
		return fmt.Errorf("objstore: delete %s: %w", key, err)
	}
	return nil
}

// List calls fn with every object whose key starts with prefix.
func (s *S3) List(ctx context.Context, prefix string, fn func(key string, modified time.Time) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops the listing goroutine when fn fails
	for o := range s.cli.ListObjects(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s.prefix + prefix, Recursive: true}) {
		if o.Err != nil {
			return fmt.Errorf("objstore: list: %w", o.Err)
		}
		if err := fn(strings.TrimPrefix(o.Key, s.prefix), o.LastModified); err != nil {
			return err
		}
	}
	return nil
}
