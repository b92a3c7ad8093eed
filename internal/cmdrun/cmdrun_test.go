package cmdrun

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"
)

// The context ends when the parent's end of the pipe closes, and not
// before.
func TestUntilClosed(t *testing.T) {
	t.Parallel()
	r, w := io.Pipe()
	ctx, cancel := UntilClosed(context.Background(), r, zap.NewNop())
	defer cancel()
	if _, err := w.Write([]byte("anything the parent writes is read and ignored\n")); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatal("cancelled while the pipe is open")
	}
	_ = w.Close()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("not cancelled after the pipe closed")
	}

}

func TestEnvOr(t *testing.T) {
	t.Setenv("CAST_CMDRUN_TEST", "set")
	t.Setenv("CAST_CMDRUN_EMPTY", "")
	for _, tc := range []struct{ k, want string }{
		{"CAST_CMDRUN_TEST", "set"},
		{"CAST_CMDRUN_EMPTY", "def"},
		{"CAST_CMDRUN_UNSET_XYZ", "def"},
	} {
		if got := EnvOr(tc.k, "def"); got != tc.want {
			t.Errorf("EnvOr(%q) = %q, want %q", tc.k, got, tc.want)
		}
	}
}

// Logged reads the format and level when the command runs (after its
// flags are parsed), refuses a bad one before run, and hands run a logger.
func TestLogged(t *testing.T) {
	for _, tc := range []struct {
		name, format, level string
		wantRun             bool
	}{
		{"json", "json", "info", true},
		{"console debug", "console", "debug", true},
		{"bad format", "xml", "info", false},
		{"bad level", "json", "loud", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var format, level string // set after Logged is made, as flags are
			ran := false
			runE := Logged(func() string { return format }, func() string { return level }, func(_ *cobra.Command, lg *zap.Logger) error {
				ran = lg != nil
				return nil
			})
			format, level = tc.format, tc.level
			err := runE(&cobra.Command{}, nil)
			if ran != tc.wantRun || (err == nil) != tc.wantRun {
				t.Fatalf("ran %v err %v, want ran %v", ran, err, tc.wantRun)
			}
		})
	}
}
