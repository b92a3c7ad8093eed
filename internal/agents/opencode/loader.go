package opencode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/kit"
	"github.com/cast-dev/cast/internal/fsutil"
	"github.com/cast-dev/cast/internal/transcript"
)

// DefaultTimeout bounds one opencode command when the context has none.
// A command takes 2-3 s; the first start in a fresh home has been seen to
// hang for minutes, so there must be a ceiling.
const DefaultTimeout = 2 * time.Minute

// Loader runs the real opencode CLI against the store under Target.Home.
type Loader struct {
	Bin string   // the opencode CLI
	Env []string // its environment; XDG_DATA_HOME is replaced by Target.Home
}

// DBPath is OpenCode's store under an XDG_DATA_HOME.
func DBPath(home string) string { return filepath.Join(home, "opencode", "opencode.db") }

var (
	importedRE = regexp.MustCompile(`Imported session: (ses_[A-Za-z0-9]+)`)
	ansiRE     = regexp.MustCompile(`\x1b\[[0-9;]*m`)
)

// run runs opencode with args in t.Cwd (OpenCode files a session under the
// project of the directory it runs in) and returns stdout.
func (l Loader) run(ctx context.Context, t agents.Target, args ...string) (string, error) {
	if l.Bin == "" {
		return "", errors.New("opencode: no CLI configured")
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, l.Bin, args...)
	cmd.Dir = t.Cwd
	cmd.Env = append(agents.WithoutEnv(l.Env, "XDG_DATA_HOME"), "XDG_DATA_HOME="+t.Home)
	// stdout goes to a file, not a pipe: OpenCode (on Bun) exits before a
	// pipe drains, and `opencode export` of a long session came back cut
	// at a multiple of 64 KiB; writes to a file are synchronous. The file
	// has no name, so a node killed mid-command leaves none behind.
	out, err := fsutil.NewScratch("", "cast-opencode-*.out")
	if err != nil {
		return "", fmt.Errorf("opencode %s: %w", args[0], err)
	}
	defer out.Close()
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = out.File, &stderr // the file itself: no pipe
	// The npm launcher runs the real binary as a child: kill the group.
	runErr := kit.RunGroup(cmd)
	stdout, err := readFromStart(out.File)
	if err != nil {
		return "", fmt.Errorf("opencode %s: read its output: %w", args[0], err)
	}
	if runErr != nil {
		msg := strings.TrimSpace(ansiRE.ReplaceAllString(stderr.String()+string(stdout), ""))
		return string(stdout), fmt.Errorf("opencode %s: %w: %s", args[0], runErr, msg)
	}
	return string(stdout), nil
}

// readFromStart reads f whole from its first byte (a child wrote it
// through a descriptor that shares f's offset).
func readFromStart(f *os.File) ([]byte, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}

// Import loads an export file with `opencode import` and returns the
// session id it reports.
func (l Loader) Import(ctx context.Context, t agents.Target, file string) (string, error) {
	out, err := l.run(ctx, t, "import", file)
	if err != nil {
		return "", err
	}
	m := importedRE.FindStringSubmatch(ansiRE.ReplaceAllString(out, ""))
	if m == nil {
		return "", fmt.Errorf("opencode import: no session id in %q", out)
	}
	return m[1], nil
}

// Delete removes a session; a session that does not exist is not an error.
func (l Loader) Delete(ctx context.Context, t agents.Target, id string) error {
	_, err := l.run(ctx, t, "session", "delete", id)
	if err != nil && strings.Contains(err.Error(), "Session not found") {
		return nil
	}
	return err
}

// Export returns what `opencode export <id>` prints.
func (l Loader) Export(ctx context.Context, t agents.Target, id string) ([]byte, error) {
	out, err := l.run(ctx, t, "export", id)
	return []byte(out), err
}

// DefaultModel is the model OpenCode's resolved configuration names.
func (l Loader) DefaultModel(ctx context.Context, t agents.Target) (ModelRef, error) {
	out, err := l.run(ctx, t, "debug", "config")
	if err != nil {
		return ModelRef{}, err
	}
	var cfg struct {
		Model string `json:"model"`
	}
	if i := strings.IndexByte(out, '{'); i >= 0 {
		out = out[i:]
	}
	if err := json.Unmarshal([]byte(out), &cfg); err != nil {
		return ModelRef{}, fmt.Errorf("opencode debug config: %w", err)
	}
	m, ok := ParseModel(cfg.Model)
	if !ok {
		return ModelRef{}, errors.New("opencode: no default model configured; set the target's model as provider/model")
	}
	return m, nil
}

// ParseModel splits "provider/model" (the model part may hold more slashes).
func ParseModel(s string) (ModelRef, bool) {
	p, m, ok := strings.Cut(s, "/")
	if !ok || p == "" || m == "" {
		return ModelRef{}, false
	}
	return ModelRef{ProviderID: p, ModelID: m}, true
}

// Writer renders neutral messages as an OpenCode session and loads it into
// the store under Target.Home (XDG_DATA_HOME) with the real `opencode
// import`, so `opencode run -s <id>` and the TUI find it.
type Writer struct {
	Loader
	// Now stamps messages without a time and seeds ids; nil means time.Now.
	Now func() time.Time
}

// Write implements agents.Writer. The model is t.Model when it is
// provider/model, else OpenCode's configured default.
func (w Writer) Write(t agents.Target, msgs []transcript.Message) (agents.Written, error) {
	if err := t.Check("opencode"); err != nil {
		return agents.Written{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*DefaultTimeout)
	defer cancel()
	model, ok := ParseModel(t.Model)
	if !ok {
		var err error
		if model, err = w.DefaultModel(ctx, t); err != nil {
			return agents.Written{}, err
		}
	}
	ex, err := Render(t, msgs, RenderOptions{Model: model, Now: kit.Clock(w.Now)()})
	if err != nil {
		return agents.Written{}, err
	}
	id, err := w.Load(ctx, t, ex)
	if err != nil {
		return agents.Written{}, err
	}
	return agents.Written{NativeID: id, Path: DBPath(t.Home)}, nil
}

// Load imports ex into the store under t.Home. OpenCode ignores a session
// whose id it already has, so an existing one is deleted first; a refused
// import is cleaned up because import is not atomic.
func (l Loader) Load(ctx context.Context, t agents.Target, ex Export) (string, error) {
	if err := Validate(ex); err != nil {
		return "", err
	}
	if err := os.MkdirAll(t.Home, 0o755); err != nil {
		return "", err
	}
	// The file goes to the temporary folder (mode 0600), not the user's
	// data folder, where a node killed mid-import would leave it.
	f, err := os.CreateTemp("", "cast-opencode-import-*.json")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	if err := WriteExport(f, ex); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	if t.NativeID != "" {
		if err := l.Delete(ctx, t, ex.Info.ID); err != nil {
			return "", err
		}
	}
	id, err := l.Import(ctx, t, f.Name())
	if err != nil {
		_ = l.Delete(ctx, t, ex.Info.ID)
		return "", err
	}
	if id != ex.Info.ID {
		return "", fmt.Errorf("opencode import: got session %s, want %s", id, ex.Info.ID)
	}
	return id, nil
}
