package e2e

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/testharness"
)

// maxFuncLines is how long a function of cast's own code may be: about a
// screen, so a reader sees a whole step at once (the structure step split
// every longer one into named steps).
const maxFuncLines = 80

// Every function of cast's own code (not tests, not generated code) fits
// on a screen; a table (a body that only returns a composite literal, as
// the RPC policy does) is data and may be longer.
func TestFunctionsFitOnAScreen(t *testing.T) {
	t.Parallel()
	root := testharness.RepoRoot(t)
	fset := token.NewFileSet()
	for _, dir := range []string{"cmd", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && skipDir(d.Name(), path, root) {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			for _, decl := range f.Decls {
				fd, ok := decl.(*ast.FuncDecl)
				if !ok || fd.Body == nil || isTable(fd.Body) {
					continue
				}
				if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line; n > maxFuncLines {
					rel, _ := filepath.Rel(root, path)
					t.Errorf("%s:%d %s is %d lines (at most %d: split it into named steps)", rel, fset.Position(fd.Pos()).Line, fd.Name.Name, n, maxFuncLines)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// skipDir says whether a folder holds no hand-written Go of cast's:
// generated code, test data, the web app's and the agents' packages.
func skipDir(name, path, root string) bool {
	rel, _ := filepath.Rel(root, path)
	return name == "testdata" || name == "node_modules" || rel == filepath.Join("internal", "gen")
}

// isTable reports whether body only names a value or two and returns a
// composite literal: a table, not steps.
func isTable(body *ast.BlockStmt) bool {
	if len(body.List) == 0 || len(body.List) > 2 {
		return false
	}
	ret, ok := body.List[len(body.List)-1].(*ast.ReturnStmt)
	if !ok || len(ret.Results) != 1 {
		return false
	}
	_, ok = ret.Results[0].(*ast.CompositeLit)
	return ok
}
