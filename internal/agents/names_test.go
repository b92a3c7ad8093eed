package agents_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents"
)

// Everything about one agent lives in internal/agents: a switch case, an
// ==/!= comparison or a map key on an agent's name anywhere else is agent
// knowledge that escaped its driver, and the runner, node, fleet and CLI
// ask the driver or the registry instead. Tests outside are held to the switch half: a test may compare a
// result with the agent it expects (sess.Agent != "codex"), but per-agent
// set-up belongs to agenttest.
func TestNoAgentNameBranchesOutsideAgents(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	found := agentNameBranches(t, root)
	for _, f := range found {
		t.Errorf("%s: branches on an agent name outside internal/agents; ask the agent's driver instead", f)
	}
}

// The checker itself must see each form it forbids.
func TestAgentNameBranchCheckerSeesEachForm(t *testing.T) {
	dir := t.TempDir()
	src := `package x
func f(name string, a struct{ Name string }) int {
	switch name {
	case "claude", "codex":
		return 1
	case "other":
	}
	switch {
	case a.Name == "gemini":
		return 2
	}
	if "pi" != name {
		return 3
	}
	_ = map[string]bool{"opencode": true, "x": false}
	if name == "vim" {
		return 4
	}
	return 0
}
`
	for _, f := range []string{"x.go", "x_test.go"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got := agentNameBranches(t, dir)
	want := []string{"x.go:4", "x.go:4", "x.go:9", "x.go:12", "x.go:15", "x_test.go:4", "x_test.go:4"}
	if !slices.Equal(got, want) {
		t.Fatalf("found %v, want %v (claude, codex, gemini, pi, opencode; only the switch in a test)", got, want)
	}
}

// agentNameBranches lists file:line of every case and (outside tests)
// comparison or map key on a registered agent's name in Go files under
// root, outside internal/agents and generated code.
func agentNameBranches(t *testing.T, root string) []string {
	t.Helper()
	names := agents.Names()
	isName := func(e ast.Expr) bool {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return false
		}
		s, err := strconv.Unquote(lit.Value)
		return err == nil && slices.Contains(names, s)
	}
	skip := []string{"internal/agents", "internal/gen", ".ci", ".git", "node_modules"}
	var found []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if slices.Contains(skip, rel) || (rel != "." && strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		at := func(n ast.Node) {
			found = append(found, rel+":"+strconv.Itoa(fset.Position(n.Pos()).Line))
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SwitchStmt:
				if n.Tag == nil {
					return true
				}
				for _, s := range n.Body.List {
					for _, e := range s.(*ast.CaseClause).List {
						if isName(e) {
							at(e)
						}
					}
				}
			case *ast.BinaryExpr:
				if !strings.HasSuffix(path, "_test.go") && (n.Op == token.EQL || n.Op == token.NEQ) && (isName(n.X) || isName(n.Y)) {
					at(n)
				}
			case *ast.KeyValueExpr:
				if !strings.HasSuffix(path, "_test.go") && isName(n.Key) {
					at(n)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}
