package store_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
)

// TestScanReadsEveryKeyOnceAcrossPages fills prefixes with 0, 1, exactly
// a page and a page plus one keys, with neighbours on both sides that are
// not under the prefix, and checks the scan sees each key once, in
// order, in full pages but the last.
func TestScanReadsEveryKeyOnceAcrossPages(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	ctx := ctxT(t)
	for _, tc := range []struct {
		name string
		n    int
	}{
		{"empty", 0},
		{"one", 1},
		{"page", store.ScanPage},
		{"page+1", store.ScanPage + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := "scan/" + tc.name + "/"
			want := make([]string, tc.n)
			for i := range want {
				want[i] = fmt.Sprintf("%s%05d", prefix, i)
			}
			// "scan/x" and "scan/x0" sort just before and just after the prefix.
			neighbours := []string{"scan/" + tc.name, "scan/" + tc.name + "0"}
			if err := store.PutKeys(ctx, s, append(slices.Clone(want), neighbours...), "v"); err != nil {
				t.Fatal(err)
			}
			var got, pages []string
			err := store.ScanPages(ctx, s, prefix, store.ScanPage, false, func(keys, vals []string) error {
				if len(keys) == 0 {
					t.Error("scan handed out an empty page")
				}
				if len(keys) > store.ScanPage {
					t.Errorf("a page of %d keys, over the page size %d", len(keys), store.ScanPage)
				}
				for _, v := range vals {
					if v != "v" {
						t.Fatalf("value %q, want %q", v, "v")
					}
				}
				got, pages = append(got, keys...), append(pages, keys[0])
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("scanned %d keys (first %q), want %d in order", len(got), firstOf(got), len(want))
			}
			if wantPages := (tc.n + store.ScanPage - 1) / store.ScanPage; len(pages) != wantPages {
				t.Fatalf("%d pages, want %d", len(pages), wantPages)
			}
			var each []string
			if err := store.ScanPrefix(ctx, s, prefix, func(k string) error { each = append(each, k); return nil }); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(each, want) {
				t.Fatalf("scanPrefix saw %d keys, want %d in order", len(each), len(want))
			}
		})
	}
}

// TestScanStopsAtTheFirstError: an error from fn ends the scan there and
// is what the scan returns; keys-only reads carry no values.
func TestScanStopsAtTheFirstError(t *testing.T) {
	s := testharness.OpenStore(t, testharness.StartEtcd(t, nil), nil)
	ctx := ctxT(t)
	var keys []string
	for i := range 10 {
		keys = append(keys, fmt.Sprintf("stop/%02d", i))
	}
	if err := store.PutKeys(ctx, s, keys, "v"); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("stop")
	for _, tc := range []struct {
		name      string
		stopAt    int // the call that fails
		wantCalls int
	}{
		{"first page", 1, 1},
		{"middle page", 2, 2},
		{"last page", 4, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := store.ScanPages(ctx, s, "stop/", 3, true, func(_, vals []string) error {
				calls++
				if slices.ContainsFunc(vals, func(v string) bool { return v != "" }) {
					t.Errorf("keys-only page carries values %q", vals)
				}
				if calls == tc.stopAt {
					return stop
				}
				return nil
			})
			if !errors.Is(err, stop) {
				t.Fatalf("scan returned %v, want fn's error", err)
			}
			if calls != tc.wantCalls {
				t.Fatalf("fn called %d times, want %d", calls, tc.wantCalls)
			}
		})
	}
	seen := 0
	err := store.ScanPrefix(ctx, s, "stop/", func(string) error {
		seen++
		return stop
	})
	if !errors.Is(err, stop) || seen != 1 {
		t.Fatalf("scanPrefix returned %v after %d keys, want fn's error after 1", err, seen)
	}
}

func firstOf(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	return keys[0]
}
