package e2e

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/testharness"
)

// Only the control plane links etcd: the CLI and the node speak gRPC.
func TestOnlyControlPlaneLinksEtcd(t *testing.T) {
	t.Parallel()
	root := testharness.RepoRoot(t)
	for _, pkg := range []string{"./cmd/cast", "./cmd/node"} {
		for _, dep := range deps(t, root, pkg) {
			if strings.HasPrefix(dep, "go.etcd.io/") || strings.HasSuffix(dep, "/internal/store") {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
	cmd := exec.Command("go", "list", "-deps", "./cmd/controlplane")
	cmd.Dir = root
	out, _ := cmd.Output()
	if !strings.Contains(string(out), "go.etcd.io/etcd/server/v3/embed") {
		t.Error("controlplane should link the embedded etcd")
	}
}

// Only the control plane talks to the Kubernetes API (internal/kube:
// --publish-k8s and the bootstrap Job), over plain HTTPS: no binary links
// client-go or the API types (k8s.io/api is for the deploy tests), and
// the node and the CLI link neither kube nor kubeboot.
func TestOnlyControlPlaneTalksToKubernetes(t *testing.T) {
	t.Parallel()
	root := testharness.RepoRoot(t)
	for _, pkg := range []string{"./cmd/cast", "./cmd/node", "./cmd/controlplane"} {
		for _, dep := range deps(t, root, pkg) {
			if strings.HasPrefix(dep, "k8s.io/client-go") || strings.HasPrefix(dep, "k8s.io/api/") || strings.HasPrefix(dep, "k8s.io/apimachinery/") {
				t.Errorf("%s depends on %s", pkg, dep)
			}
			if pkg != "./cmd/controlplane" && (strings.HasSuffix(dep, "/internal/kube") || strings.HasSuffix(dep, "/internal/kubeboot")) {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
	if !slices.Contains(deps(t, root, "./cmd/controlplane"), "github.com/cast-dev/cast/internal/kubeboot") {
		t.Error("controlplane should link internal/kubeboot (--publish-k8s, k8s-bootstrap)")
	}
}

// The control plane gates on agent capabilities by name
// (internal/capability) and links neither the canary that checks them nor
// its runner and fake model, nor the node daemon: only a node runs CLIs.
// `controlplane --dev` runs its node as a child process of the node binary
// (internal/devmode), found by internal/nodebin.
func TestControlPlaneLinksNoRunner(t *testing.T) {
	t.Parallel()
	root := testharness.RepoRoot(t)
	const module = "github.com/cast-dev/cast"
	banned := []string{"/internal/runner", "/internal/fakemodel", "/internal/canary", "/internal/node"}
	for _, pkg := range []string{"./cmd/controlplane", "./internal/devmode", "./internal/nodebin", "./internal/controlplane", "./internal/moves", "./internal/capability", "./internal/adoption"} {
		for _, dep := range deps(t, root, pkg) {
			if slices.Contains(banned, strings.TrimPrefix(dep, module)) {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
	// The node links them all: the names above are still packages.
	nodeDeps := deps(t, root, "./cmd/node")
	for _, b := range banned {
		if !slices.Contains(nodeDeps, module+b) {
			t.Errorf("cmd/node does not link %s: this test no longer names the runner's packages", b)
		}
	}
}

// The CLI links no daemon: no control plane, dev mode or node (nor the
// store: TestOnlyControlPlaneLinksEtcd), and no agent runner: not the
// runner, the canary or its fake model. What needs them on the user's
// machine (`cast agents check`'s canary, `cast exec --dry-run`'s command
// line) runs in the node binary, a child process (internal/nodebin).
func TestCLILinksNoDaemon(t *testing.T) {
	t.Parallel()
	root := testharness.RepoRoot(t)
	const module = "github.com/cast-dev/cast"
	cast := deps(t, root, "./cmd/cast")
	for _, banned := range []string{"/internal/controlplane", "/internal/devmode", "/internal/node", "/internal/runner", "/internal/fakemodel", "/internal/canary"} {
		if slices.Contains(cast, module+banned) {
			t.Errorf("cmd/cast depends on %s", module+banned)
		}
	}
	for _, want := range []string{"/internal/cli", "/internal/nodebin"} {
		if !slices.Contains(cast, module+want) {
			t.Errorf("cmd/cast does not link %s: this test no longer sees the CLI", module+want)
		}
	}
}

// The cores that speak the fence vocabulary (internal/fence) link no etcd:
// they reach it only through interfaces the store implements, so only
// the store (and the embedded server, and the tests' harness) import it.
func TestCoresLinkNoEtcd(t *testing.T) {
	t.Parallel()
	root := testharness.RepoRoot(t)
	for _, core := range []string{"fence", "fleet", "migrate", "moves", "turnstate", "archive", "placement", "delivery", "capability", "custody", "catrust", "adoption", "authn", "retention"} {
		for _, dep := range deps(t, root, "./internal/"+core) {
			if strings.HasPrefix(dep, "go.etcd.io/") || strings.HasSuffix(dep, "/internal/store") {
				t.Errorf("internal/%s depends on %s", core, dep)
			}
		}
	}
}

// Only the store imports etcd's client (token custody's record included),
// besides the embedded server and the tests' harness that start etcd.
func TestOnlyStoreImportsEtcd(t *testing.T) {
	t.Parallel()
	root := testharness.RepoRoot(t)
	allowed := []string{"internal/store", "internal/etcdembed", "internal/testharness"}
	for pkg, imps := range imports(t, root) {
		for _, imp := range imps {
			if strings.HasPrefix(imp, "go.etcd.io/") && !slices.Contains(allowed, pkg) {
				t.Errorf("%s imports %s", pkg, imp)
			}
		}
	}
}

// The map's cores speak no gRPC: none links the API's client, and only
// the store imports gRPC's packages, for the error codes and metadata of
// etcd's own client. Handlers (internal/controlplane) translate for them.
func TestCoresSpeakNoGRPC(t *testing.T) {
	t.Parallel()
	root := testharness.RepoRoot(t)
	cores := []string{"store", "objstore", "catrust", "moves", "migrate", "adoption", "fanout", "fleet", "turnstate", "archive", "retention", "authz", "authn", "oidcauth", "placement", "delivery", "brief", "custody", "etcdembed"}
	etcdErrors := []string{"google.golang.org/grpc/codes", "google.golang.org/grpc/metadata", "google.golang.org/grpc/status"}
	imps := imports(t, root)
	for _, core := range cores {
		pkg := "internal/" + core
		if _, ok := imps[pkg]; !ok {
			t.Errorf("%s is no package: this test no longer sees it", pkg)
		}
		for _, imp := range imps[pkg] {
			if strings.HasPrefix(imp, "google.golang.org/grpc") && !(core == "store" && slices.Contains(etcdErrors, imp)) {
				t.Errorf("%s imports %s", pkg, imp)
			}
		}
		if reaches(imps, pkg, "internal/client") {
			t.Errorf("%s depends on internal/client", pkg)
		}
	}
}

// reaches reports whether from imports to, directly or through cast's
// own packages (imps, keyed as imports keys them).
func reaches(imps map[string][]string, from, to string) bool {
	const module = "github.com/cast-dev/cast/"
	seen := map[string]bool{}
	stack := []string{from}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, imp := range imps[p] {
			own, ok := strings.CutPrefix(imp, module)
			if !ok || seen[own] {
				continue
			}
			if own == to {
				return true
			}
			seen[own] = true
			stack = append(stack, own)
		}
	}
	return false
}

// imports is what each package of cmd/ and internal/ imports (its tests
// left out), keyed by its path inside the module.
func imports(t *testing.T, root string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./cmd/...", "./internal/...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		m[strings.TrimPrefix(fields[0], "github.com/cast-dev/cast/")] = fields[1:]
	}
	return m
}

// Each agent's package holds its registry entry (agents.Define), so an
// agent is known where its package is linked. One catalog,
// internal/agents/codecs, links them; everything else asks the registry
// and imports no agent package (tests may, to drive one agent's CLI).
func TestOnlyTheCatalogImportsAgentPackages(t *testing.T) {
	t.Parallel()
	root := testharness.RepoRoot(t)
	// An agent package is one that defines an agent (its agent.go).
	isAgent := func(imp string) bool {
		rel, ok := strings.CutPrefix(imp, "github.com/cast-dev/cast/internal/agents/")
		if !ok || strings.Contains(rel, "/") {
			return false
		}
		_, err := os.Stat(filepath.Join(root, "internal", "agents", rel, "agent.go"))
		return err == nil
	}
	if !isAgent("github.com/cast-dev/cast/internal/agents/claude") {
		t.Fatal("internal/agents/claude/agent.go is gone: this test no longer finds agent packages")
	}
	for pkg, imps := range imports(t, root) {
		for _, imp := range imps {
			if isAgent(imp) && pkg != "internal/agents/codecs" {
				t.Errorf("%s imports %s; ask the registry (agents.Lookup) or link internal/agents/codecs", pkg, imp)
			}
		}
	}
}

// The catalog (internal/agents/codecs) is linked by the binaries (cmd/)
// and the tests' harness, which runs control planes and nodes in its
// process, and by no other package: a package asks the registry by name
// and works with whichever agents its binary links.
func TestOnlyBinariesLinkTheCatalog(t *testing.T) {
	t.Parallel()
	root := testharness.RepoRoot(t)
	const catalog = "github.com/cast-dev/cast/internal/agents/codecs"
	all := imports(t, root)
	for _, bin := range []string{"cmd/cast", "cmd/node", "cmd/controlplane"} {
		if !slices.Contains(all[bin], catalog) {
			t.Errorf("%s does not import the catalog: it would know no agent", bin)
		}
	}
	for pkg, imps := range all {
		if slices.Contains(imps, catalog) && !strings.HasPrefix(pkg, "cmd/") && pkg != "internal/testharness" {
			t.Errorf("%s imports the catalog; ask the registry (agents.ReaderFor, WriterFor, CredentialFor, ...) and let the binary link it", pkg)
		}
	}
}

// The contract (internal/agents) is what cast asks of an agent; the kit
// (internal/agents/kit) is how the agent packages implement it. Only
// packages under internal/agents import the kit: everything else asks the
// contract, so a helper of one agent's format never becomes a host's API.
func TestOnlyAgentPackagesImportTheKit(t *testing.T) {
	t.Parallel()
	root := testharness.RepoRoot(t)
	const kit = "github.com/cast-dev/cast/internal/agents/kit"
	all := imports(t, root)
	if _, ok := all["internal/agents/kit"]; !ok {
		t.Fatal("internal/agents/kit is gone: this test no longer finds the kit")
	}
	users := 0
	for pkg, imps := range all {
		if !slices.Contains(imps, kit) {
			continue
		}
		users++
		if !strings.HasPrefix(pkg, "internal/agents/") {
			t.Errorf("%s imports the agents' kit; ask the contract (internal/agents) instead", pkg)
		}
	}
	if users == 0 {
		t.Error("no package imports internal/agents/kit: this test no longer sees its importers")
	}
}

// A node's adoption (internal/adopt) reads files and hands batches to a
// Sink; the node wires the Sink to gRPC. The follower itself links no
// gRPC, no client and no store, so it is tested with plain files.
func TestAdoptLinksNoGRPC(t *testing.T) {
	t.Parallel()
	root := testharness.RepoRoot(t)
	for _, dep := range deps(t, root, "./internal/adopt") {
		for _, banned := range []string{"google.golang.org/grpc", "go.etcd.io/", "github.com/cast-dev/cast/internal/client", "github.com/cast-dev/cast/internal/store"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("internal/adopt depends on %s", dep)
			}
		}
	}
}

// History beyond etcd: the store declares the object store it uses
// (store.Objects) and links neither internal/objstore nor an S3 client;
// only the control plane links them, never the CLI or the node.
func TestOnlyControlPlaneLinksObjectStore(t *testing.T) {
	t.Parallel()
	root := testharness.RepoRoot(t)
	for _, pkg := range []string{"./internal/store", "./cmd/cast", "./cmd/node"} {
		for _, dep := range deps(t, root, pkg) {
			if strings.HasPrefix(dep, "github.com/minio/") || strings.HasSuffix(dep, "/internal/objstore") {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
	if !slices.Contains(deps(t, root, "./cmd/controlplane"), "github.com/minio/minio-go/v7") {
		t.Error("controlplane should link the S3 client (--s3-endpoint)")
	}
}

// deps is every package pkg links (go list -deps), run in root.
func deps(t *testing.T, root, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", pkg)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// Leaves import nothing of cast's (and nothing of etcd's or gRPC's): the
// fleet's account, usage-window and limit types (internal/quota), shared by
// the runner, the node, the store, the wire and the fleet; the one ticker
// loop (internal/tick) behind every periodic job; the neutral transcript
// (internal/transcript), which knows no agent's format; and the delivery
// checker (internal/deliverycheck), which, like porcupine, knows nothing
// of cast.
func TestLeavesImportNothing(t *testing.T) {
	t.Parallel()
	root := testharness.RepoRoot(t)
	for _, leaf := range []string{"internal/quota", "internal/tick", "internal/transcript", "internal/deliverycheck"} {
		for _, dep := range deps(t, root, "./"+leaf) {
			if first, _, _ := strings.Cut(dep, "/"); dep != "github.com/cast-dev/cast/"+leaf && strings.Contains(first, ".") {
				t.Errorf("%s depends on %s", leaf, dep)
			}
		}
	}
}

// The packages whose docs say they know nothing of gRPC or etcd and work
// on plain values link neither, not even through the API's generated
// types: the git runner, the turn runner (the node daemon stores what it
// emits), the CA, address checks (so a core that checks an address links
// no gRPC) and the field rules (callers pass plain values).
func TestPlainPackagesLinkNoGRPCOrEtcd(t *testing.T) {
	t.Parallel()
	root := testharness.RepoRoot(t)
	for _, pkg := range []string{"git", "runner", "pki", "netaddr", "validate"} {
		for _, dep := range deps(t, root, "./internal/"+pkg) {
			if strings.HasPrefix(dep, "google.golang.org/grpc") || strings.HasPrefix(dep, "go.etcd.io/") {
				t.Errorf("internal/%s depends on %s", pkg, dep)
			}
		}
	}
}

// docs/architecture.md opens with a map of every package and the arrows
// between them; this keeps it true. Each package line is indented two
// spaces: name, what it is, then "→" and the cast packages it imports,
// less the arrows a path of others implies and those into the foundation
// (the group whose header starts "foundation"), which must import nothing
// outside itself.
func TestArchitectureMap(t *testing.T) {
	t.Parallel()
	root := testharness.RepoRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	drawn, foundation, err := parseMap(string(doc))
	if err != nil {
		t.Fatalf("docs/architecture.md: %v", err)
	}
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./cmd/...", "./internal/...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := ownImports(string(out))
	for _, problem := range checkMap(drawn, foundation, imports) {
		t.Errorf("docs/architecture.md's map: %s", problem)
	}
}

// parseMap reads the map's block: package name to the arrows drawn from
// it, and the foundation's packages.
func parseMap(doc string) (drawn map[string][]string, foundation map[string]bool, err error) {
	_, rest, ok := strings.Cut(doc, "## Map\n")
	if !ok {
		return nil, nil, errors.New(`no "## Map" section`)
	}
	_, rest, ok = strings.Cut(rest, "```\n")
	block, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		return nil, nil, errors.New("the map section has no ``` block")
	}
	drawn, foundation = map[string][]string{}, map[string]bool{}
	inFoundation := false
	for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
		if !strings.HasPrefix(line, "  ") {
			inFoundation = strings.HasPrefix(line, "foundation")
			continue
		}
		left, arrows, _ := strings.Cut(line, "→")
		name := strings.Fields(left)[0]
		if _, dup := drawn[name]; dup {
			return nil, nil, fmt.Errorf("%s has two lines", name)
		}
		drawn[name] = []string{}
		for _, a := range strings.Fields(arrows) {
			drawn[name] = append(drawn[name], expandBraces(a)...)
		}
		if inFoundation {
			foundation[name] = true
		}
	}
	return drawn, foundation, nil
}

// expandBraces turns agents/{claude,codex} into agents/claude agents/codex.
func expandBraces(s string) []string {
	head, rest, ok := strings.Cut(s, "{")
	alts, tail, closed := strings.Cut(rest, "}")
	if !ok || !closed {
		return []string{s}
	}
	var out []string
	for _, a := range strings.Split(alts, ",") {
		out = append(out, head+a+tail)
	}
	return out
}

// ownImports maps each package of `go list`'s lines (path, then imports)
// to the cast packages it imports, by the map's short names (internal/
// left out).
func ownImports(list string) map[string][]string {
	const module = "github.com/cast-dev/cast/"
	short := func(p string) string { return strings.TrimPrefix(strings.TrimPrefix(p, module), "internal/") }
	out := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		f := strings.Fields(line)
		pkg := short(f[0])
		out[pkg] = []string{}
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, module) {
				out[pkg] = append(out[pkg], short(imp))
			}
		}
	}
	return out
}

// checkMap compares the drawn arrows with the imports: every package has
// a line and every line a package; the foundation imports only itself;
// and each package's arrows are its imports (less the foundation's, for a
// package outside it) that no path through its other imports reaches.
func checkMap(drawn map[string][]string, foundation map[string]bool, imports map[string][]string) []string {
	var problems []string
	reach := func(from string) map[string]bool {
		seen := map[string]bool{}
		stack := slices.Clone(imports[from])
		for len(stack) > 0 {
			p := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if !seen[p] {
				seen[p] = true
				stack = append(stack, imports[p]...)
			}
		}
		return seen
	}
	for _, pkg := range slices.Sorted(maps.Keys(imports)) {
		arrows, ok := drawn[pkg]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s has no line", pkg))
			continue
		}
		var direct []string
		for _, imp := range imports[pkg] {
			switch {
			case foundation[pkg] && !foundation[imp]:
				problems = append(problems, fmt.Sprintf("%s is in the foundation but imports %s, which is not", pkg, imp))
			case foundation[pkg] || !foundation[imp]:
				direct = append(direct, imp)
			}
		}
		var want []string
		for _, d := range direct {
			implied := false
			for _, other := range direct {
				if other != d && reach(other)[d] {
					implied = true
				}
			}
			if !implied {
				want = append(want, d)
			}
		}
		slices.Sort(want)
		got := slices.Sorted(slices.Values(arrows))
		if !slices.Equal(got, want) {
			problems = append(problems, fmt.Sprintf("%s → %s; its imports say → %s", pkg, strings.Join(got, " "), strings.Join(want, " ")))
		}
	}
	for _, pkg := range slices.Sorted(maps.Keys(drawn)) {
		if _, ok := imports[pkg]; !ok {
			problems = append(problems, fmt.Sprintf("%s has a line but is no package", pkg))
		}
	}
	return problems
}

// The map's check fails on each way the map can go wrong.
func TestArchitectureMapCheck(t *testing.T) {
	t.Parallel()
	imports := map[string][]string{
		"cmd/x": {"core", "store", "errs"}, // store: implied through core
		"core":  {"store", "errs"},
		"store": {"errs"},
		"errs":  {},
	}
	foundation := map[string]bool{"errs": true}
	good := map[string][]string{"cmd/x": {"core"}, "core": {"store"}, "store": {}, "errs": {}}
	for _, tc := range []struct {
		name  string
		edit  func(d map[string][]string, imp map[string][]string)
		wants string // "" for no problem
	}{
		{"the true map", func(map[string][]string, map[string][]string) {}, ""},
		{"a package without a line", func(d, _ map[string][]string) { delete(d, "store") }, "store has no line"},
		{"a line without a package", func(d, _ map[string][]string) { d["gone"] = []string{} }, "gone has a line but is no package"},
		{"an arrow missing", func(d, _ map[string][]string) { d["core"] = []string{} }, "core → ; its imports say → store"},
		{"an arrow that is no import", func(d, _ map[string][]string) { d["store"] = []string{"core"} }, "store → core"},
		{"an implied arrow drawn", func(d, _ map[string][]string) { d["cmd/x"] = []string{"core", "store"} }, "cmd/x → core store"},
		{"the foundation importing outside it", func(_, imp map[string][]string) { imp["errs"] = []string{"store"} }, "errs is in the foundation but imports store"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, imp := maps.Clone(good), maps.Clone(imports)
			tc.edit(d, imp)
			problems := checkMap(d, foundation, imp)
			if tc.wants == "" {
				if len(problems) > 0 {
					t.Fatalf("problems %q, want none", problems)
				}
				return
			}
			if !slices.ContainsFunc(problems, func(p string) bool { return strings.HasPrefix(p, tc.wants) }) {
				t.Fatalf("problems %q, want one starting %q", problems, tc.wants)
			}
		})
	}
}

// The map's parser reads names, arrows (braces expanded) and the
// foundation's group.
func TestParseMap(t *testing.T) {
	t.Parallel()
	doc := "# x\n\n## Map\n\ntext\n\n```\ncores\n  core     what it is   → a/{b,c} d\n  lone     no arrows\nfoundation: any\n  errs     typed errors\n```\n"
	drawn, foundation, err := parseMap(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"core": {"a/b", "a/c", "d"}, "lone": {}, "errs": {}}
	if !maps.EqualFunc(drawn, want, slices.Equal) || !maps.Equal(foundation, map[string]bool{"errs": true}) {
		t.Fatalf("parseMap = %v, %v; want %v and errs the foundation", drawn, foundation, want)
	}
	if _, _, err := parseMap("# no map\n"); err == nil {
		t.Fatal("parseMap of a doc without a map: no error")
	}
}
