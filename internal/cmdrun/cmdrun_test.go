package cmdrun

import (
	"context"
	"io"
	"testing"
	"time"

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
