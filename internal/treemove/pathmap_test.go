package treemove

import (
	"reflect"
	"testing"

	"github.com/cast-dev/cast/internal/git"
)

func TestParsePathMap(t *testing.T) {
	cases := []struct {
		name  string
		specs []string
		want  PathMap
		bad   bool
	}{
		{"none", nil, nil, false},
		{"one", []string{"/home/a=/srv/a"}, PathMap{{"/home/a", "/srv/a"}}, false},
		{"cleaned", []string{"/home/a/=/srv//a/."}, PathMap{{"/home/a", "/srv/a"}}, false},
		{"equals in TO", []string{"/a=/b=c"}, PathMap{{"/a", "/b=c"}}, false},
		{"no equals", []string{"/home/a"}, nil, true},
		{"relative FROM", []string{"home/a=/srv/a"}, nil, true},
		{"relative TO", []string{"/home/a=srv/a"}, nil, true},
		{"empty TO", []string{"/home/a="}, nil, true},
		{"duplicate FROM", []string{"/a=/b", "/a/=/c"}, nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParsePathMap(c.specs)
			if c.bad {
				if !git.IsKind(err, git.KindInvalid) {
					t.Fatalf("err = %v, want git.KindInvalid", err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %v, %v; want %v", got, err, c.want)
			}
		})
	}
}

func TestPathMapApply(t *testing.T) {
	p, err := ParsePathMap([]string{"/home/alice=/srv/alice", "/home/alice/src=/code", "/tmp/x=/"})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ in, want string }{
		{"/home/alice", "/srv/alice"},
		{"/home/alice/notes", "/srv/alice/notes"},
		{"/home/alice/src", "/code"},
		{"/home/alice/src/cast", "/code/cast"},
		{"/home/alice/src/", "/code"},
		{"/home/alicea/src", "/home/alicea/src"}, // not a component boundary
		{"/home/bob", "/home/bob"},
		{"/tmp/x/y", "/y"},
		{"relative/path", "relative/path"},
	}
	for _, c := range cases {
		if got := p.Apply(c.in); got != c.want {
			t.Errorf("Apply(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	root := PathMap{{From: "/", To: "/mnt/src"}, {From: "/opt", To: "/o"}}
	for in, want := range map[string]string{"/a/b": "/mnt/src/a/b", "/": "/mnt/src", "/opt/z": "/o/z"} {
		if got := root.Apply(in); got != want {
			t.Errorf("root Apply(%q) = %q, want %q", in, got, want)
		}
	}
}

// Top finds the destination's checkout from its path for the exported
// directory; a subdirectory that is not the end of that path is refused.
func TestManifestTop(t *testing.T) {
	cases := []struct {
		name, subdir, dir, want string
		bad                     bool
	}{
		{"top", "", "/srv/repo", "/srv/repo", false},
		{"one level", "pkg", "/srv/repo/pkg", "/srv/repo", false},
		{"two levels", "pkg/api", "/srv/repo/pkg/api", "/srv/repo", false},
		{"other end", "pkg/api", "/srv/repo/pkg/web", "", true},
		{"dot dot", "../etc", "/srv/etc", "", true},
		{"absolute", "/etc", "/etc", "", true},
		{"unclean", "pkg//api", "/srv/repo/pkg/api", "", true},
		{"longer than the path", "a/b/c", "/b/c", "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Manifest{Subdir: c.subdir}.Top(c.dir)
			if c.bad {
				if err == nil {
					t.Fatalf("Top = %q, want an error", got)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("Top = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}
