package devmode

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/cast-dev/cast/internal/fsutil"
)

// The dev node's command line says every setting --dev chose, so none of
// the node's own defaults or variables decides it.
func TestNodeArgs(t *testing.T) {
	n := Node{DataDir: "/d/node", Name: "devnode", Labels: []string{"a", "b"}, MetricsListen: "127.0.0.1:7779",
		AgentChecks: true, TokenCustody: true, Adopt: true, LogFormat: "console", LogLevel: "info"}
	got := n.args("127.0.0.1:7777", "sha256:abc", false)
	for _, want := range [][]string{
		{"--controlplane", "127.0.0.1:7777"}, {"--ca-pin=sha256:abc"}, {"--join-token="}, {"--insecure=false"},
		{"--data-dir", "/d/node"}, {"--name", "devnode"}, {"--metrics-listen=127.0.0.1:7779"},
		{"--isolated-homes=false"}, {"--fleet-accounts=false"}, {"--agent-checks=true"}, {"--token-custody=true"},
		{"--probe=false"}, {"--adopt=true"}, {"--agents-config="}, {"--cast-bin=", "--find-cast-bin"},
		{"--exit-with-parent"}, {"--log-format", "console"}, {"--label", "a", "--label", "b"},
	} {
		if !containsRun(got, want) {
			t.Errorf("args %q lack %q", got, want)
		}
	}
}

// containsRun says whether want appears in s, in order and adjacent.
func containsRun(s, want []string) bool {
	for i := range s {
		if i+len(want) <= len(s) && slices.Equal(s[i:i+len(want)], want) {
			return true
		}
	}
	return false
}

// A dev start waits for the node of a dev process killed a moment ago to
// let go of its data dir, and starts once it has.
func TestWaitDirFree(t *testing.T) {
	dir := t.TempDir()
	if err := waitDirFree(context.Background(), dir, zap.NewNop()); err != nil {
		t.Fatalf("a free dir: %v", err)
	}
	held, err := fsutil.LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	done := make(chan error, 1)
	go func() { done <- waitDirFree(context.Background(), dir, zap.New(core)) }()
	deadline := time.Now().Add(10 * time.Second)
	for logs.FilterMessage("waiting for the previous dev node to stop").Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no wait logged while the dir is held")
		}
		select {
		case err := <-done:
			t.Fatalf("returned %v while the dir is held", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	held.Unlock()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("after the holder let go: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still waiting after the holder let go")
	}

	held, err = fsutil.LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := waitDirFree(ctx, dir, zap.NewNop()); !errors.Is(err, context.Canceled) {
		t.Fatalf("held, context cancelled: %v", err)
	}
}

// The child's lifeline: it reads its stdin until the control plane closes
// it (stop), then exits; stop returns once it has, and its command line
// reached it. A stand-in node (a shell script) records what it got.
func TestChildStopsWhenItsStdinCloses(t *testing.T) {
	dir := t.TempDir()
	got := filepath.Join(dir, "got")
	bin := filepath.Join(dir, "node")
	script := "#!/bin/sh\necho \"$@\" > " + got + ".tmp && mv " + got + ".tmp " + got + "\ncat > /dev/null\necho stopped >> " + got + "\n"
	if err := os.WriteFile(bin, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	n := Node{Bin: bin, DataDir: filepath.Join(dir, "data"), Name: "devnode", LogFormat: "json", LogLevel: "info", Env: os.Environ()}
	c, err := startChild(context.Background(), n, "127.0.0.1:1", "", true, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.exited:
		t.Fatalf("the child exited while its stdin is open: %v", c.err)
	default:
	}
	c.stop(zap.NewNop())
	select {
	case <-c.exited:
	default:
		t.Fatal("stop returned before the child exited")
	}
	if c.err != nil {
		t.Fatalf("the child: %v", c.err)
	}
	b, err := os.ReadFile(got)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.Contains(s, "--controlplane 127.0.0.1:1") || !strings.Contains(s, "--exit-with-parent") || !strings.HasSuffix(s, "stopped\n") {
		t.Fatalf("the child got and did:\n%s", s)
	}
}
