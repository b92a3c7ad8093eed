package controlplane_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/objstore"
	"github.com/cast-dev/cast/internal/retention"
	"github.com/cast-dev/cast/internal/testharness"
)

// The object store flags are checked at start: one store, a whole S3
// config, a tiering policy that fits the store.
func TestConfigChecksObjectStore(t *testing.T) {
	s3 := objstore.S3Config{Endpoint: "http://127.0.0.1:9000", Bucket: "b", Creds: objstore.Creds{AccessKeyID: "k", SecretAccessKey: "s"}}
	for _, tc := range []struct {
		name    string
		folder  string
		s3      objstore.S3Config
		hot     int64
		wantErr bool
	}{
		{"none", "", objstore.S3Config{}, 1000, false},
		{"folder", "/tmp/x", objstore.S3Config{}, 1000, false},
		{"s3", "", s3, 1000, false},
		{"both", "/tmp/x", s3, 1000, true},
		{"s3 without credentials", "", objstore.S3Config{Endpoint: s3.Endpoint, Bucket: "b"}, 1000, true},
		{"negative hot tail", "/tmp/x", objstore.S3Config{}, -1, true},
		{"negative hot tail, no store", "", objstore.S3Config{}, -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testharness.ControlPlaneConfig(t)
			cfg.Objects.Folder, cfg.Objects.S3, cfg.Tier.HotMessages = tc.folder, tc.s3, tc.hot
			if err := cfg.Validate(); (err != nil) != tc.wantErr {
				t.Fatalf("Validate = %v, want error %v", err, tc.wantErr)
			}
		})
	}
}

// A retention policy is checked at start too: --retain rules (which the
// flag also checks as it parses) and --retain-every.
func TestConfigChecksRetention(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rules []retention.Rule
		every time.Duration
		want  string // "" when valid
	}{
		{"none", nil, time.Hour, ""},
		{"a rule", []retention.Rule{{Principal: "user:alice", Window: 90 * 24 * time.Hour}}, time.Hour, ""},
		{"no role", []retention.Rule{{Principal: "alice", Window: 90 * 24 * time.Hour}}, time.Hour, `--retain: principal "alice"`},
		{"an hour", []retention.Rule{{Principal: "*", Window: time.Hour}}, time.Hour, "--retain: rule *=1h0m0s: a window under 24h0m0s"},
		{"every zero", nil, 0, "--retain-every"},
		{"dedupe window", nil, time.Hour, "tier dedupe window"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testharness.ControlPlaneConfig(t)
			cfg.Retention.Policy.Rules, cfg.Retention.Every = tc.rules, tc.every
			if tc.name == "dedupe window" {
				cfg.Objects.Folder, cfg.Tier.DedupeWindow = "/tmp/x", time.Second
			}
			err := cfg.Validate()
			if (err != nil) != (tc.want != "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate = %v, want %q", err, tc.want)
			}
		})
	}
}

// --pprof is refused unless the metrics listener is on loopback: the
// profiles ask no credential.
func TestConfigKeepsProfilesOnLoopback(t *testing.T) {
	for _, tc := range []struct {
		listen  string
		pprof   bool
		wantErr bool
	}{
		{"127.0.0.1:7778", true, false},
		{"localhost:7778", true, false},
		{"[::1]:7778", true, false},
		{"0.0.0.0:7778", true, true},
		{"", true, true},
		{"0.0.0.0:7778", false, false},
	} {
		t.Run(fmt.Sprintf("%s pprof=%v", tc.listen, tc.pprof), func(t *testing.T) {
			cfg := testharness.ControlPlaneConfig(t)
			cfg.MetricsListen, cfg.Pprof = tc.listen, tc.pprof
			err := cfg.Validate()
			if (err != nil) != tc.wantErr || err != nil && !strings.Contains(err.Error(), "--pprof") {
				t.Fatalf("Validate = %v, want error %v", err, tc.wantErr)
			}
		})
	}
}
