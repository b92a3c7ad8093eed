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
