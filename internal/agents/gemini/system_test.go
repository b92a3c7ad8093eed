package gemini

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/fakemodel"
)

func TestSystemDefaultsPath(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{nil, "/etc/gemini-cli/system-defaults.json"},
		{map[string]string{SystemSettingsEnv: "/opt/g/settings.json"}, "/opt/g/system-defaults.json"},
		{map[string]string{SystemSettingsEnv: "/opt/g/settings.json", SystemDefaultsEnv: "/x/d.json"}, "/x/d.json"},
	} {
		if got := SystemDefaultsPath(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.env, got, tc.want)
		}
	}
}

// CheckSystemFile agrees with the real Gemini CLI on which system-defaults
// files it reads: one it rejects is skipped with a "Security Warning" and
// one it accepts is read (its model setting is used).
func TestE2ECheckSystemFileAgrees(t *testing.T) {
	fake := fakemodel.Start(t)
	bin := agenttest.Bin(t, "gemini")
	_, env := agenttest.Env(t, "gemini", fake.URL)
	cwd := t.TempDir()
	content := []byte(`{"model":{"name":"sysdefaults-model"}}`)
	type file struct {
		name string
		dir  string
		mode os.FileMode
	}
	files := []file{{"under /tmp", t.TempDir(), 0o644}}
	if root := agenttest.RootOnlyDir(t); root != "" {
		files = append(files, file{"root-only", root, 0o644}, file{"root-only, writable by others", root, 0o666})
	}
	for i, f := range files {
		path := filepath.Join(f.dir, "defaults"+string(rune('a'+i))+".json")
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, f.mode); err != nil {
			t.Fatal(err)
		}
		ours := CheckSystemFile(path)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		prompt := "hello " + f.name
		res := agenttest.RunInput(t, ctx, bin, nil, append(env, SystemDefaultsEnv+"="+path), cwd, &prompt)
		cancel()
		skipped := strings.Contains(res.Stderr+res.Stdout, "Security Warning")
		turns := fake.Turns()
		used := len(turns) > 0 && turns[len(turns)-1].Model == "sysdefaults-model"
		t.Logf("%s: ours %v, gemini skipped %v, model used %v", f.name, ours, skipped, used)
		if (ours != nil) != skipped || skipped == used {
			t.Errorf("%s: CheckSystemFile %v; gemini skipped it %v, read it %v (exit %d)\n%s", f.name, ours, skipped, used, res.ExitCode, res.Stderr)
		}
	}
}
