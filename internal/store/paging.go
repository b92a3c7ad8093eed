package store

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"

	"github.com/cast-dev/cast/internal/errs"
)

// pageToken is opaque to clients: where to resume, and at which revision
// for listings read from one etcd snapshot, so a listing is one
// consistent view. It names the last key handed out, never an offset: an
// item inserted or removed between two pages moves no other item across
// the page boundary.
type pageToken struct {
	After   string `json:"a"`
	Rev     int64  `json:"r,omitempty"`
	Session string `json:"s,omitempty"` // a message listing's session
	List    string `json:"l,omitempty"` // a Page listing's name
	Scope   string `json:"q,omitempty"` // the query it belongs to (SessionQuery.Scope)
}

func encodeToken(t pageToken) string {
	b, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(b)
}

func parseToken(s string) (pageToken, bool) {
	var t pageToken
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, &t)
	}
	return t, err == nil && t.After != ""
}

// decodeToken reads a token of a listing at an etcd revision.
func decodeToken(s string) (pageToken, error) {
	t, ok := parseToken(s)
	if !ok || t.Rev <= 0 || t.List != "" {
		return t, errs.New(errs.KindInvalid, errs.ReasonBadPageToken, "page token is malformed; start the listing again without it")
	}
	return t, nil
}

// Page is the one pager of the short listings (nodes, tokens, accounts,
// agent checks, worktrees) that the control plane reads whole
// and hands out in pages (AIP-158): the items whose key sorts after the
// token's, in key order, at most size of them, and a token for the rest.
// keys must be unique within the listing; list names it, so a token from
// another listing is refused (INVALID_PAGE_TOKEN) rather than misread.
func Page[T any](items []T, key func(T) string, size int, token, list string) ([]T, string, error) {
	size, after := max(size, 1), ""
	if token != "" {
		t, ok := parseToken(token)
		if !ok || t.List != list || t.Rev != 0 || t.Session != "" {
			return nil, "", badToken("is not one this listing handed out")
		}
		after = t.After
	}
	sorted := slices.SortedStableFunc(slices.Values(items), func(a, b T) int { return strings.Compare(key(a), key(b)) })
	i, _ := slices.BinarySearchFunc(sorted, after, func(it T, k string) int { return strings.Compare(key(it), k) })
	for i < len(sorted) && after != "" && key(sorted[i]) <= after {
		i++
	}
	page := sorted[i:min(len(sorted), i+size)]
	next := ""
	if i+size < len(sorted) {
		next = encodeToken(pageToken{After: key(page[len(page)-1]), List: list})
	}
	return page, next, nil
}
