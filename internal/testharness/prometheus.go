package testharness

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Prometheus is a real Prometheus server (Debian's package; `make debs`
// installs it) scraping the test's processes every second.
type Prometheus struct {
	Addr string // web and HTTP API, on loopback
}

// ScrapeJob is one scrape job's targets (host:port serving /metrics):
// over HTTPS trusting CAFile and verifying ServerName when CAFile is set
// (cast's fixed names: pki.ServerName for control planes,
// pki.NodeMetricsName for nodes), as deploy/k8s configures it; plain HTTP
// (--insecure) without.
type ScrapeJob struct {
	Targets            []string
	CAFile, ServerName string
	// Keep, when set, keeps only the metric names it matches (a regex):
	// a job that stands for another process's families on the same port.
	Keep string
}

// StartPrometheus runs prometheus with rules loaded (may be empty) and one
// scrape job per entry of jobs (by job name); it stops at cleanup.
func StartPrometheus(t testing.TB, rules string, jobs map[string]ScrapeJob) *Prometheus {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus is not installed; run `make debs` (Debian package prometheus)")
	}
	var cfg strings.Builder
	// A 2s scrape timeout (the interval caps it; at 1s it was 1s): a
	// control plane's TLS metrics page, etcd's families included, took
	// longer than a second beside other tests on two loaded cores, and a
	// failed scrape marks every series of the target stale.
	cfg.WriteString("global:\n  scrape_interval: 2s\n  scrape_timeout: 2s\n  evaluation_interval: 1s\n")
	if rules != "" {
		fmt.Fprintf(&cfg, "rule_files: [%q]\n", rules)
	}
	cfg.WriteString("scrape_configs:\n")
	for name, job := range jobs {
		b, _ := json.Marshal(job.Targets)
		fmt.Fprintf(&cfg, "  - job_name: %q\n", name)
		if job.CAFile != "" {
			fmt.Fprintf(&cfg, "    scheme: https\n    tls_config:\n      ca_file: %q\n      server_name: %q\n", job.CAFile, job.ServerName)
		}
		fmt.Fprintf(&cfg, "    static_configs:\n      - targets: %s\n", b)
		if job.Keep != "" {
			fmt.Fprintf(&cfg, "    metric_relabel_configs:\n      - source_labels: [__name__]\n        regex: %q\n        action: keep\n", job.Keep)
		}
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	web := l.Addr().String()
	l.Close()
	StartProc(t, bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+web)
	return &Prometheus{Addr: web}
}

// Sample is one element of an instant query's result.
type Sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// Query runs an instant query; an error is a failed call or a query
// Prometheus refused (its message included).
func (p *Prometheus) Query(q string) ([]Sample, error) {
	var resp struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := p.get("/api/v1/query?query="+url.QueryEscape(q), &resp); err != nil {
		return nil, err
	}
	if resp.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", q, resp.Error)
	}
	if resp.Data.ResultType == "scalar" {
		var v [2]any
		if err := json.Unmarshal(resp.Data.Result, &v); err != nil {
			return nil, err
		}
		return []Sample{{Value: v}}, nil
	}
	var out []Sample
	err := json.Unmarshal(resp.Data.Result, &out)
	return out, err
}

// Value is the first sample's value of q (false: no sample, or an error).
func (p *Prometheus) Value(q string) (float64, bool) {
	res, err := p.Query(q)
	if err != nil || len(res) == 0 {
		return 0, false
	}
	s, _ := res[0].Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}

// RuleHealth maps every loaded rule's name to its health ("ok" once
// evaluated without error).
func (p *Prometheus) RuleHealth() (map[string]string, error) {
	var resp struct {
		Data struct {
			Groups []struct {
				Rules []struct {
					Name, Health string
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	if err := p.get("/api/v1/rules", &resp); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, g := range resp.Data.Groups {
		for _, r := range g.Rules {
			out[r.Name] = r.Health
		}
	}
	return out, nil
}

func (p *Prometheus) get(path string, v any) error {
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + p.Addr + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}
