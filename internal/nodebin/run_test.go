package nodebin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/capability"
)

// fakeNode is an executable standing in for the node binary: script is
// its body (a real process, run without a shell of ours).
func fakeNode(t *testing.T, script string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "node")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

// CheckAgent runs `node check-agent --agent A --bin B --exit-with-parent`
// and reads its one JSON reply.
func TestCheckAgentReadsTheReply(t *testing.T) {
	node := fakeNode(t, `[ "$1 $2 $4 $6" = "check-agent --agent --bin --exit-with-parent" ] || exit 3
printf '{"agent":"%s","version":"1.2.3","bin":"%s","checks":[{"capability":"write","passed":true},{"capability":"resume","passed":false,"detail":"lost"}]}\n' "$3" "$5"`)
	got, err := CheckAgent(context.Background(), node, "codex", "/bin/codex", &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := capability.Result{Agent: "codex", Version: "1.2.3", Bin: "/bin/codex", Checks: []capability.Check{
		{Capability: "write", Passed: true}, {Capability: "resume", Detail: "lost"}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("CheckAgent = %+v, want %+v", got, want)
	}
}

// CommandLine hands the request over on stdin (a prompt may be longer
// than an argument may be) and reads the line back.
func TestCommandLineSendsTheRequest(t *testing.T) {
	seen := filepath.Join(t.TempDir(), "request")
	node := fakeNode(t, `[ "$*" = "command-line" ] || exit 3
cat > '`+seen+`'
echo '{"argv":["claude","-p"],"stdin":"hi","prompt_on_stdin":true}'`)
	req := LineRequest{Agent: "claude", Cwd: "/w", Prompt: strings.Repeat("p", 300_000), Home: "/h", NodeAgentDir: "/n/.claude"}
	got, err := CommandLine(context.Background(), node, req, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if want := (Line{Argv: []string{"claude", "-p"}, Stdin: "hi", PromptOnStdin: true}); !reflect.DeepEqual(got, want) {
		t.Fatalf("CommandLine = %+v, want %+v", got, want)
	}
	raw, err := os.ReadFile(seen)
	if err != nil {
		t.Fatal(err)
	}
	var sent LineRequest
	if err := json.Unmarshal(raw, &sent); err != nil || !reflect.DeepEqual(sent, req) {
		t.Fatalf("the node got %.200q (%v), want the request", raw, err)
	}
}

// A node that fails says so on the caller's stderr, and the error names
// the subcommand; a reply that is not JSON is an error too.
func TestNodeFailures(t *testing.T) {
	for _, tc := range []struct {
		name, script, wantErr, wantStderr string
	}{
		{"exit 1", `echo "node: boom" >&2; exit 1`, "check-agent: exit status 1", "node: boom"},
		{"not JSON", `echo hello`, `check-agent replied "hello\n"`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			_, err := CheckAgent(context.Background(), fakeNode(t, tc.script), "codex", "/bin/codex", &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Fatalf("err %v, stderr %q; want %q and %q", err, stderr.String(), tc.wantErr, tc.wantStderr)
			}
		})
	}
}

// writerFunc is an io.Writer that calls f on each write.
type writerFunc func([]byte)

func (f writerFunc) Write(p []byte) (int, error) { f(p); return len(p), nil }

// When the caller's context ends, the canary's child is told by its
// lifeline (stdin closes) and stops by itself, long before it would be
// killed.
func TestCheckAgentLifeline(t *testing.T) {
	// The child says it started, then waits for its stdin to close.
	node := fakeNode(t, `echo started >&2; cat >/dev/null; echo '{}'`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := time.Now()
	_, err := CheckAgent(ctx, node, "codex", "/bin/codex", writerFunc(func([]byte) { cancel() }))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if d := time.Since(started); d >= stopTimeout {
		t.Fatalf("the child stopped after %v: killed, not stopped by its lifeline", d)
	}
}
