package errs_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"google.golang.org/grpc/codes"
)

// TestEveryReasonHasOneCode reads the source of internal/ and cmd/ and
// fails when an ErrorInfo reason is made with two gRPC codes: a client
// that switches on the reason (the CLI's advice, scripts) would see it
// under either. Sites are every errs.New and errs.Error literal, every
// call of a function that passes its parameters through to one (errs'
// helpers, authz.Denied, ...), controlplane's withInfo, the
// map[string]errs.Kind tables, the kind, reason = K, R tuples and
// validate's rules (a rule's reason replaces its errs.Invalid's; a Reason
// set on a made error anywhere else is not seen: don't). A kind
// is turned into its code by controlplane's kindCodes, read from
// status.go, so this test keeps no copy of that table. A site whose kind
// or reason the scan cannot resolve fails the test unless its function is
// in dynamicSites, which says why the scan sees its pairs anyway.
func TestEveryReasonHasOneCode(t *testing.T) {
	s := scanReasons(t)
	for _, p := range s.problems {
		t.Error(p)
	}
	for _, f := range sortedKeys(dynamicSites) {
		if !s.dynamicUsed[f] {
			t.Errorf("dynamicSites names %s, which makes no error the scan cannot resolve: drop it", f)
		}
	}
	byReason := map[string]map[string][]string{}
	for _, st := range s.sites {
		if byReason[st.reason] == nil {
			byReason[st.reason] = map[string][]string{}
		}
		byReason[st.reason][st.code] = append(byReason[st.reason][st.code], st.pos)
	}
	reasons := make([]string, 0, len(byReason))
	for r := range byReason {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		if len(byReason[r]) < 2 {
			continue
		}
		var b strings.Builder
		for _, c := range sortedKeys(byReason[r]) {
			fmt.Fprintf(&b, "\n  %s at %s", c, strings.Join(byReason[r][c], ", "))
		}
		t.Errorf("reason %s is made with %d codes:%s", r, len(byReason[r]), b.String())
	}
	// A reason spelled as a code is that code's: scripts read
	// INVALID_ARGUMENT as "fix the request".
	spelled := map[string]string{}
	for c := range codes.Code(17) {
		spelled[codeReason(c.String())] = c.String()
	}
	for _, r := range reasons {
		for c, pos := range byReason[r] {
			if named, ok := spelled[r]; ok && named != c {
				t.Errorf("reason %s, spelled as a code, is made with code %s at %s", r, c, strings.Join(pos, ", "))
			}
		}
	}
	// The scan reads what it should: a broken resolver finds nothing and
	// would pass.
	if len(s.sites) < 150 || len(reasons) < 60 {
		t.Fatalf("the scan found only %d sites of %d reasons; is it reading the source?", len(s.sites), len(reasons))
	}
	for _, r := range reasons {
		t.Logf("%s %v", r, sortedKeys(byReason[r]))
	}
}

// dynamicSites are the functions that make an error from a kind and a
// reason the scan cannot resolve at the call, and why it sees their
// pairs anyway.
var dynamicSites = map[string]string{
	"internal/kube.statusError":         "chooses from kind, reason = errs.KindX, errs.ReasonY tuples, read as pairs",
	"internal/controlplane.nodeRefusal": "chooses from the nodeReasons map literal and a tuple, read as pairs",
	"internal/controlplane.toStatus":    "the mapping itself: a cast error's code is kindCodes[e.Kind]",
	"internal/controlplane.invalid":     "errs.Invalid's own kind and reason, read in package errs",
}

const (
	module   = "github.com/cast-dev/cast"
	scanRoot = "../.." // the module root, from internal/errs
	errsPkg  = module + "/internal/errs"
	cpPkg    = module + "/internal/controlplane"
	codesPkg = "google.golang.org/grpc/codes"
)

type reasonSite struct{ reason, code, pos string }

type srcFile struct {
	pkg     string // import path
	f       *ast.File
	imports map[string]string // local name → import path
}

// maker is a function that makes a cast error or status: each of kind
// (or code) and reason is a fixed set of values or one of its parameters.
type maker struct {
	kindArg, reasonArg int      // parameter index, -1 when fixed
	codes, reasons     []string // the fixed values
}

type reasonScanner struct {
	fset      *token.FileSet
	files     []srcFile
	consts    map[string]map[string]constDef // import path → name → definition
	kindCodes map[string]string              // KindX → code name
	makers    map[string]maker               // import path + "." + func name
	sites     []reasonSite
	problems  []string
	seen      map[string]bool
	// dynamicUsed are the dynamicSites met: one not met is stale.
	dynamicUsed map[string]bool
}

type constDef struct {
	val ast.Expr
	fl  *srcFile
}

// codeReason spells a code name as a reason: InvalidArgument is
// INVALID_ARGUMENT.
func codeReason(code string) string {
	var b strings.Builder
	for i, c := range code {
		if i > 0 && unicode.IsUpper(c) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(c))
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func scanReasons(t *testing.T) *reasonScanner {
	t.Helper()
	s := &reasonScanner{fset: token.NewFileSet(), consts: map[string]map[string]constDef{},
		kindCodes: map[string]string{}, makers: map[string]maker{}, seen: map[string]bool{}, dynamicUsed: map[string]bool{}}
	for _, dir := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(scanRoot, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				switch d.Name() {
				case "node_modules", "gen", "testdata", "app", "dist":
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			f, err := parser.ParseFile(s.fset, path, src, 0)
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(scanRoot, filepath.Dir(path))
			if err != nil {
				return err
			}
			fl := srcFile{pkg: module + "/" + filepath.ToSlash(rel), f: f, imports: map[string]string{}}
			for _, im := range f.Imports {
				p, _ := strconv.Unquote(im.Path.Value)
				name := p[strings.LastIndex(p, "/")+1:]
				if im.Name != nil {
					name = im.Name.Name
				}
				fl.imports[name] = p
			}
			s.files = append(s.files, fl)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range s.files {
		s.collectConsts(&s.files[i])
	}
	s.readKindCodes()
	if len(s.kindCodes) < 8 {
		t.Fatalf("read only %d kinds of controlplane's kindCodes", len(s.kindCodes))
	}
	// withInfo is where a status gets its ErrorInfo: its code is arg 0.
	s.makers[cpPkg+".withInfo"] = maker{kindArg: 0, reasonArg: 2}
	// Find the makers: errs.New, then what passes parameters through to a
	// maker, until no more are found.
	for range 10 {
		n := len(s.makers)
		s.walk(false)
		if len(s.makers) == n {
			break
		}
	}
	s.walk(true)
	return s
}

func (s *reasonScanner) collectConsts(fl *srcFile) {
	if s.consts[fl.pkg] == nil {
		s.consts[fl.pkg] = map[string]constDef{}
	}
	for _, d := range fl.f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, sp := range gd.Specs {
			vs := sp.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if i < len(vs.Values) {
					s.consts[fl.pkg][n.Name] = constDef{vs.Values[i], fl}
				}
			}
		}
	}
}

// readKindCodes reads controlplane's kindCodes map literal.
func (s *reasonScanner) readKindCodes() {
	for i := range s.files {
		fl := &s.files[i]
		if fl.pkg != cpPkg {
			continue
		}
		ast.Inspect(fl.f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok || len(vs.Names) != 1 || vs.Names[0].Name != "kindCodes" || len(vs.Values) != 1 {
				return true
			}
			for _, e := range vs.Values[0].(*ast.CompositeLit).Elts {
				kv := e.(*ast.KeyValueExpr)
				k, v := s.qualified(fl, kv.Key), s.qualified(fl, kv.Value)
				if strings.HasPrefix(k, errsPkg+".Kind") && strings.HasPrefix(v, codesPkg+".") {
					s.kindCodes[strings.TrimPrefix(k, errsPkg+".")] = strings.TrimPrefix(v, codesPkg+".")
				}
			}
			return false
		})
	}
}

// qualified names an identifier or selector as import path + "." + name.
func (s *reasonScanner) qualified(fl *srcFile, e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return fl.pkg + "." + x.Name
	case *ast.SelectorExpr:
		if id, ok := x.X.(*ast.Ident); ok {
			if p, ok := fl.imports[id.Name]; ok {
				return p + "." + x.Sel.Name
			}
		}
	case *ast.ParenExpr:
		return s.qualified(fl, x.X)
	}
	return ""
}

// stringConst is the value of a string constant expression.
func (s *reasonScanner) stringConst(fl *srcFile, e ast.Expr, depth int) (string, bool) {
	if depth > 10 {
		return "", false
	}
	if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
		v, err := strconv.Unquote(lit.Value)
		return v, err == nil
	}
	q := s.qualified(fl, e)
	i := strings.LastIndex(q, ".")
	if i < 0 {
		return "", false
	}
	if d, ok := s.consts[q[:i]][q[i+1:]]; ok {
		return s.stringConst(d.fl, d.val, depth+1)
	}
	return "", false
}

// code is the gRPC code name of a kind or code expression.
func (s *reasonScanner) code(fl *srcFile, e ast.Expr) (string, bool) {
	q := s.qualified(fl, e)
	switch {
	case strings.HasPrefix(q, errsPkg+".Kind"):
		c, ok := s.kindCodes[strings.TrimPrefix(q, errsPkg+".")]
		return c, ok
	case strings.HasPrefix(q, codesPkg+"."):
		return strings.TrimPrefix(q, codesPkg+"."), true
	}
	return "", false
}

// scope is where an argument is read: the function around it and the
// switch cases it is in.
type scope struct {
	fl     *srcFile
	fn     *ast.FuncDecl
	params []string
	cases  []*ast.CaseClause
	tags   []ast.Expr // the switch tag of each case
}

// values resolves e as a code (asCode) or a reason: its fixed values, or
// the index of the parameter it is.
func (s *reasonScanner) values(sc *scope, e ast.Expr, asCode bool) (vals []string, param int, ok bool) {
	one := func(e ast.Expr) (string, bool) {
		if asCode {
			return s.code(sc.fl, e)
		}
		return s.stringConst(sc.fl, e, 0)
	}
	if v, ok := one(e); ok {
		return []string{v}, -1, true
	}
	id, isID := e.(*ast.Ident)
	if !isID {
		return nil, -1, false
	}
	// A switch's tag, inside one of its cases: the case's values.
	for i := len(sc.cases) - 1; i >= 0; i-- {
		tag, ok := sc.tags[i].(*ast.Ident)
		if !ok || tag.Name != id.Name || len(sc.cases[i].List) == 0 {
			continue
		}
		for _, c := range sc.cases[i].List {
			v, ok := one(c)
			if !ok {
				return nil, -1, false
			}
			vals = append(vals, v)
		}
		return vals, -1, true
	}
	for i, p := range sc.params {
		if p == id.Name {
			return nil, i, true
		}
	}
	return nil, -1, false
}

// walk visits every function; record adds sites, else it finds makers.
func (s *reasonScanner) walk(record bool) {
	for i := range s.files {
		fl := &s.files[i]
		for _, d := range fl.f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Body == nil {
					continue
				}
				sc := &scope{fl: fl, fn: d}
				for _, f := range d.Type.Params.List {
					for _, n := range f.Names {
						sc.params = append(sc.params, n.Name)
					}
					if len(f.Names) == 0 {
						sc.params = append(sc.params, "_")
					}
				}
				s.visit(sc, d.Body, record)
			case *ast.GenDecl:
				if record {
					s.visit(&scope{fl: fl}, d, record)
				}
			}
		}
	}
}

func (s *reasonScanner) funcName(sc *scope) string {
	if sc.fn == nil {
		return strings.TrimPrefix(sc.fl.pkg, module+"/") + ".<decl>"
	}
	name := sc.fn.Name.Name
	if sc.fn.Recv != nil {
		name = "(method)." + name
	}
	return strings.TrimPrefix(sc.fl.pkg, module+"/") + "." + name
}

func (s *reasonScanner) visit(sc *scope, root ast.Node, record bool) {
	var stack []ast.Node
	ast.Inspect(root, func(n ast.Node) bool {
		if n == nil {
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if cc, ok := top.(*ast.CaseClause); ok && len(sc.cases) > 0 && sc.cases[len(sc.cases)-1] == cc {
				sc.cases, sc.tags = sc.cases[:len(sc.cases)-1], sc.tags[:len(sc.tags)-1]
			}
			return true
		}
		if cc, ok := n.(*ast.CaseClause); ok && len(stack) >= 2 {
			if sw, ok := stack[len(stack)-2].(*ast.SwitchStmt); ok && sw.Tag != nil {
				sc.cases, sc.tags = append(sc.cases, cc), append(sc.tags, sw.Tag)
			}
		}
		stack = append(stack, n)
		switch x := n.(type) {
		case *ast.FuncLit:
			// A closure's parameters are not its function's.
			inner := &scope{fl: sc.fl, fn: sc.fn}
			s.visit(inner, x.Body, record)
			stack = stack[:len(stack)-1]
			return false
		case *ast.CallExpr:
			key := s.qualified(sc.fl, x.Fun)
			if m, ok := s.makers[key]; ok {
				args := map[int]ast.Expr{}
				for i, a := range x.Args {
					args[i] = a
				}
				s.site(sc, x, m, args[m.kindArg], args[m.reasonArg], record)
			}
		case *ast.CompositeLit:
			s.compositeLit(sc, x, record)
		case *ast.AssignStmt:
			if record {
				s.tuple(sc, x.Rhs, x.Pos())
			}
		case *ast.ValueSpec:
			if record {
				s.tuple(sc, x.Values, x.Pos())
			}
		}
		return true
	})
}

// compositeLit reads errs.Error literals, map[string]errs.Kind tables and
// validate's rules (their reason replaces an errs.Invalid's).
func (s *reasonScanner) compositeLit(sc *scope, x *ast.CompositeLit, record bool) {
	typ := x.Type
	if u, ok := typ.(*ast.StarExpr); ok {
		typ = u.X
	}
	if q := s.qualified(sc.fl, typ); q == errsPkg+".Error" {
		var kind, reason ast.Expr
		for _, e := range x.Elts {
			if kv, ok := e.(*ast.KeyValueExpr); ok {
				switch kv.Key.(*ast.Ident).Name {
				case "Kind":
					kind = kv.Value
				case "Reason":
					reason = kv.Value
				}
			}
		}
		s.site(sc, x, maker{kindArg: 0, reasonArg: 1}, kind, reason, record)
		return
	}
	if !record {
		return
	}
	if mt, ok := typ.(*ast.MapType); ok && s.qualified(sc.fl, mt.Value) == errsPkg+".Kind" {
		for _, e := range x.Elts {
			kv := e.(*ast.KeyValueExpr)
			r, okR := s.stringConst(sc.fl, kv.Key, 0)
			c, okC := s.code(sc.fl, kv.Value)
			if !okR || !okC {
				s.problems = append(s.problems, fmt.Sprintf("%s: a reason → kind table entry the scan cannot read", s.fset.Position(kv.Pos())))
				continue
			}
			s.add(r, c, kv.Pos())
		}
	}
	if sc.fl.pkg == module+"/internal/validate" {
		for _, e := range x.Elts {
			if kv, ok := e.(*ast.KeyValueExpr); ok {
				if id, ok := kv.Key.(*ast.Ident); ok && id.Name == "reason" {
					if r, ok := s.stringConst(sc.fl, kv.Value, 0); ok {
						s.add(r, s.kindCodes["KindInvalid"], kv.Pos())
					}
				}
			}
		}
	}
}

// tuple reads kind, reason = errs.KindX, errs.ReasonY (either order) as
// a pair.
func (s *reasonScanner) tuple(sc *scope, rhs []ast.Expr, pos token.Pos) {
	if len(rhs) != 2 {
		return
	}
	for _, o := range [][2]int{{0, 1}, {1, 0}} {
		q := s.qualified(sc.fl, rhs[o[0]])
		if !strings.HasPrefix(q, errsPkg+".Kind") {
			continue
		}
		c, okC := s.code(sc.fl, rhs[o[0]])
		r, okR := s.stringConst(sc.fl, rhs[o[1]], 0)
		if okC && okR {
			s.add(r, c, pos)
		}
	}
}

func (s *reasonScanner) add(reason, code string, pos token.Pos) {
	p := s.fset.Position(pos)
	rel, _ := filepath.Rel(scanRoot, p.Filename)
	at := fmt.Sprintf("%s:%d", filepath.ToSlash(rel), p.Line)
	if s.seen[reason+code+at] {
		return
	}
	s.seen[reason+code+at] = true
	s.sites = append(s.sites, reasonSite{reason: reason, code: code, pos: at})
}

// site is one call of a maker (or an errs.Error literal) with its kind and
// reason arguments: a site, or (when it passes its function's parameters
// through) a new maker.
func (s *reasonScanner) site(sc *scope, at ast.Node, m maker, kindE, reasonE ast.Expr, record bool) {
	codes, kp := m.codes, -1
	if m.kindArg >= 0 {
		var ok bool
		if kindE == nil {
			ok = false
		} else {
			codes, kp, ok = s.values(sc, kindE, true)
		}
		if !ok {
			s.unresolved(sc, at, record, "kind")
			return
		}
	}
	reasons, rp := m.reasons, -1
	if m.reasonArg >= 0 {
		var ok bool
		if reasonE != nil {
			reasons, rp, ok = s.values(sc, reasonE, false)
		}
		if !ok {
			s.unresolved(sc, at, record, "reason")
			return
		}
	}
	if kp >= 0 || rp >= 0 {
		if sc.fn == nil || sc.fn.Recv != nil {
			s.unresolved(sc, at, record, "kind or reason (a method's or closure's parameter)")
			return
		}
		key := sc.fl.pkg + "." + sc.fn.Name.Name
		if _, ok := s.makers[key]; !ok {
			s.makers[key] = maker{kindArg: kp, reasonArg: rp, codes: codes, reasons: reasons}
		}
		return
	}
	if !record {
		return
	}
	for _, r := range reasons {
		for _, c := range codes {
			s.add(r, c, at.Pos())
		}
	}
}

func (s *reasonScanner) unresolved(sc *scope, at ast.Node, record bool, what string) {
	if !record {
		return
	}
	if _, ok := dynamicSites[s.funcName(sc)]; ok {
		s.dynamicUsed[s.funcName(sc)] = true
		return
	}
	s.problems = append(s.problems, fmt.Sprintf("%s (%s): the scan cannot resolve this error's %s; make it a constant, pass it through a parameter, or add the function to dynamicSites saying why its pairs are seen",
		s.fset.Position(at.Pos()), s.funcName(sc), what))
}
