package cli

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/testharness"
)

// Stdout holds the result a script reads; a hint for people (the next
// command to run) goes to stderr, as gh does and `cast token cert` did
// (`cast send` put "follow it with `cast watch ID`" on stdout). Checked
// over the package's source, so a command added later is too: no text
// printed to stdout (a.out, cmd.OutOrStdout()) names a `cast ...` command.
func TestHintsOnStderr(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	calls := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		// A writer named for stdout (`w := a.out`) is stdout too.
		aliases := map[string]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			if as, ok := n.(*ast.AssignStmt); ok && len(as.Lhs) == 1 && len(as.Rhs) == 1 && isStdout(as.Rhs[0], nil) {
				if id, ok := as.Lhs[0].(*ast.Ident); ok {
					aliases[id.Name] = true
				}
			}
			return true
		})
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) < 2 || !isFmtPrint(call.Fun) || !isStdout(call.Args[0], aliases) {
				return true
			}
			calls++
			for _, arg := range call.Args[1:] {
				lit, ok := arg.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				if s, _ := strconv.Unquote(lit.Value); strings.Contains(s, "`cast ") {
					t.Errorf("%s: a hint naming a command on stdout, %q: print it to a.errOut", fset.Position(lit.Pos()), s)
				}
			}
			return true
		})
	}
	if calls < 50 {
		t.Fatalf("saw only %d prints to stdout", calls)
	}
}

func isFmtPrint(fun ast.Expr) bool {
	sel, ok := fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "fmt" && strings.HasPrefix(sel.Sel.Name, "Fprint")
}

// isStdout says whether w is the CLI's stdout: a.out (w.a.out, ...),
// cmd.OutOrStdout() or a variable in aliases.
func isStdout(w ast.Expr, aliases map[string]bool) bool {
	switch w := w.(type) {
	case *ast.Ident:
		return aliases[w.Name]
	case *ast.SelectorExpr:
		return w.Sel.Name == "out"
	case *ast.CallExpr:
		sel, ok := w.Fun.(*ast.SelectorExpr)
		return ok && sel.Sel.Name == "OutOrStdout"
	}
	return false
}

// The confirmations a script reads stay on stdout, one line, and the
// next step is on stderr (run against a control plane).
func TestConfirmationsOnStdoutHintsOnStderr(t *testing.T) {
	srv := testharness.StartControlPlane(t, nil)
	addr := srv.Addr()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	testharness.StartNode(t, addr, "n1", func(c *node.Config) { c.AgentBins = map[string]string{} })
	c := testharness.Dial(t, addr)
	testharness.WaitConnected(t, c, "n1", true)
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	// The sent message's turn fails at once (the node has no claude), but
	// `cast rm` refuses a session while that turn is still running: under
	// load its report came after the rm (a fresh-clone run), so the rm
	// waits for it.
	turnEnded := func() {
		testharness.WaitFor(t, time.Minute, "the sent message's turn to end", func() bool {
			s, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{Id: sess.Id})
			return err == nil && s.State == castv1.SessionState_SESSION_STATE_FAILED
		})
	}
	for _, tc := range []struct {
		args         []string
		stdout, hint string
		after        func()
	}{
		{[]string{"send", sess.Id, "hello"}, "sent #1 to " + sess.Id + "\n", "`cast watch " + sess.Id + "`", turnEnded},
		{[]string{"rm", sess.Id}, "archived " + sess.Id + "\n", "`cast read " + sess.Id + "`", nil},
		{[]string{"config", "set-context", "lab", "--addr", addr}, "made context \"lab\"\n", "`cast config use-context lab`", nil},
	} {
		out, errOut, code := runMain(t, addr, tc.args...)
		if code != 0 || out != tc.stdout || !strings.Contains(errOut, tc.hint) {
			t.Errorf("cast %s: exit %d, stdout %q, stderr %q; want stdout %q and the hint %q on stderr", strings.Join(tc.args, " "), code, out, errOut, tc.stdout, tc.hint)
		}
		if tc.after != nil {
			tc.after()
		}
	}
}
