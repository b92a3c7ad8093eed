package listfilter

import (
	"reflect"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/errs"
)

var fields = []Field{{Name: "agent"}, {Name: "label"}, {Name: "state", Values: []string{"idle", "running"}}}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want Filter
		bad  string // a part of the refusal; "" when it parses
	}{
		{"", nil, ""},
		{"   ", nil, ""},
		{`agent = "claude"`, Filter{{Field: "agent", Value: "claude"}}, ""},
		{`agent=claude`, Filter{{Field: "agent", Value: "claude"}}, ""},
		{`agent != "codex" AND state = running`, Filter{{Field: "agent", Value: "codex", Not: true}, {Field: "state", Value: "running"}}, ""},
		{`label = "a \"quoted\" \\ one"`, Filter{{Field: "label", Value: `a "quoted" \ one`}}, ""},
		{`label = "zone=eu/1"`, Filter{{Field: "label", Value: "zone=eu/1"}}, ""},
		{`label = ""`, Filter{{Field: "label", Value: ""}}, ""},
		{`agent = "ü"`, Filter{{Field: "agent", Value: "ü"}}, ""},
		{`bogus = "x"`, nil, `unknown field "bogus"`},
		{`state = "sleeping"`, nil, `state "sleeping" is not one of idle, running`},
		{`agent = "claude" OR agent = "codex"`, nil, "expected AND"},
		{`agent = "claude" and state = idle`, nil, "expected AND"},
		{`NOT agent = "claude"`, nil, "not a term"},
		{`(agent = "claude")`, nil, "unexpected \"(\""},
		{`agent > "a"`, nil, "unexpected \">\""},
		{`agent : "a"`, nil, "not a term"},
		{`agent "claude"`, nil, "ends early"},
		{`agent =`, nil, "ends early"},
		{`agent = "claude" AND`, nil, "ends early"},
		{`agent = "claude`, nil, "not closed"},
		{`agent = "a\nb"`, nil, "escape"},
		{`agent = "="`, Filter{{Field: "agent", Value: "="}}, ""},
		{`"agent" = "claude"`, nil, "not a term"},
		{`agent = = "claude"`, nil, "not a value"},
		// A bare non-ASCII value is named as written, not by its first byte.
		{`agent = ü`, nil, `unexpected "ü" at offset 8`},
		{strings.Repeat("a", MaxLen+1), nil, "longer than"},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			got, err := Parse(tc.expr, fields...)
			if tc.bad == "" {
				if err != nil || !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("got %#v, %v; want %#v", got, err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.bad) {
				t.Fatalf("got %#v, %v; want a refusal with %q", got, err, tc.bad)
			}
			if e, ok := errs.As(err); !ok || e.Kind != errs.KindInvalid || e.Reason != errs.ReasonBadFilter {
				t.Fatalf("refusal %v is not INVALID / %s", err, errs.ReasonBadFilter)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	item := map[string][]string{"agent": {"claude"}, "label": {"gpu", "zone=eu"}, "state": {"idle"}}
	get := func(f string) []string { return item[f] }
	for _, tc := range []struct {
		expr string
		want bool
	}{
		{"", true},
		{`agent = claude`, true},
		{`agent = codex`, false},
		{`agent != codex`, true},
		{`label = gpu`, true},
		{`label = "zone=eu"`, true},
		{`label != gpu`, false},
		{`label = cpu`, false},
		{`agent = claude AND state = idle`, true},
		{`agent = claude AND state = running`, false},
	} {
		f, err := Parse(tc.expr, fields...)
		if err != nil {
			t.Fatalf("%s: %v", tc.expr, err)
		}
		if got := f.Match(get); got != tc.want {
			t.Errorf("%s: matched %v, want %v", tc.expr, got, tc.want)
		}
	}
}

// Equal writes what Parse reads back, whatever the value holds.
func TestEqualRoundTrips(t *testing.T) {
	for _, v := range []string{"claude", `a "b" \c`, "with space", "x AND y = z", ""} {
		expr := Equal("agent", v, "label", "", "state", "idle")
		f, err := Parse(expr, fields...)
		want := Filter{{Field: "agent", Value: v}, {Field: "state", Value: "idle"}}
		if v == "" {
			want = want[1:]
		}
		if err != nil || !reflect.DeepEqual(f, want) {
			t.Errorf("%q: %q parsed to %#v, %v", v, expr, f, err)
		}
	}
}
