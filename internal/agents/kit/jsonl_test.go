package kit

import (
	"fmt"
	"math"
	"testing"
	"time"
)

func TestJSONHelpersKeepCodeAsItIs(t *testing.T) {
	if got := string(RawJSON(map[string]string{"c": "a<b && c>d"}, "null")); got != `{"c":"a<b && c>d"}` {
		t.Fatalf("RawJSON = %s", got)
	}
	if got := string(RawJSON(math.NaN(), "{}")); got != "{}" {
		t.Fatalf("RawJSON of what does not encode = %s", got)
	}
	for _, tc := range []struct {
		name string
		head any
		want string
	}{
		{"with a header", map[string]int{"v": 3}, "{\"v\":3}\n\"<x>\"\n\"&\"\n"},
		{"records only", nil, "\"<x>\"\n\"&\"\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := JSONLines(tc.head, []string{"<x>", "&"})
			if err != nil || string(b) != tc.want {
				t.Fatalf("JSONLines = %q, %v; want %q", b, err, tc.want)
			}
		})
	}
	if _, err := JSONLines(nil, []float64{math.Inf(1)}); err == nil {
		t.Fatal("JSONLines of what does not encode: no error")
	}
}

func TestDecodeListKeepsTheGoodElements(t *testing.T) {
	type elem struct{ A int }
	for _, tc := range []struct {
		name, raw string
		want      []int
	}{
		{"all good", `[{"A":1},{"A":2}]`, []int{1, 2}},
		{"one odd element", `[{"A":1},"x",{"A":2}]`, []int{1, 2}},
		{"not a list", `{"A":1}`, nil},
		{"not JSON", `[`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []int
			for _, e := range DecodeList[elem]([]byte(tc.raw)) {
				got = append(got, e.A)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("DecodeList(%s) = %v, want %v", tc.raw, got, tc.want)
			}
		})
	}
}

// What DecodeElems leaves out is counted, a value that is no list
// included, so no reader loses content without a word.
func TestDecodeElemsCountsWhatItLeavesOut(t *testing.T) {
	type elem struct{ A int }
	for _, tc := range []struct {
		raw  string
		kept int
		bad  int
	}{
		{`[{"A":1},{"A":2}]`, 2, 0},
		{`[{"A":1},"x",{"A":"y"}]`, 1, 2},
		{`{"A":1}`, 0, 1},
		{`7`, 0, 1},
		{`[`, 0, 1},
		{`null`, 0, 0},
		{``, 0, 0},
	} {
		t.Run(tc.raw, func(t *testing.T) {
			out, bad := DecodeElems[elem]([]byte(tc.raw))
			if len(out) != tc.kept || bad != tc.bad {
				t.Fatalf("DecodeElems(%s) kept %d, left out %d; want %d, %d", tc.raw, len(out), bad, tc.kept, tc.bad)
			}
		})
	}
}

func TestCompactJSONAndParseTime(t *testing.T) {
	for raw, want := range map[string]string{`{ "a" : [1, 2] }`: `{"a":[1,2]}`, ``: `{}`, `{`: `{}`} {
		if got := CompactJSON([]byte(raw)); got != want {
			t.Errorf("CompactJSON(%q) = %q, want %q", raw, got, want)
		}
	}
	if got := ParseTime("2026-01-02T03:04:05.678Z"); !got.Equal(time.Date(2026, 1, 2, 3, 4, 5, 678e6, time.UTC)) {
		t.Errorf("ParseTime = %v", got)
	}
	if got := ParseTime("yesterday"); !got.IsZero() {
		t.Errorf("ParseTime of an odd stamp = %v, want zero", got)
	}
}
