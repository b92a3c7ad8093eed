package controlplane

import (
	"crypto/sha256"
	"encoding/base64"
	"slices"
	"strconv"
	"strings"

	"github.com/cast-dev/cast/internal/agents"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/listfilter"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/validate"
)

// Paging (AIP-158): every List takes page_size (0 means the listing's
// default; more than maxPageSize is read as maxPageSize) and an opaque
// page_token, and answers next_page_token, empty on the last page.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

// listArgs checks a List request's page_size and page_token and returns
// the size to read.
func listArgs(n int32, token string, def int) (int, error) {
	if n < 0 {
		return 0, invalid("page_size must not be negative")
	}
	if err := refuse(validate.Check(validate.PageToken, "page_token", token)); err != nil {
		return 0, err
	}
	if n == 0 {
		return def, nil
	}
	return min(int(n), maxPageSize), nil
}

// pager checks a List request's page_size and page_token, before the
// listing is read (a malformed one is the caller's INVALID_ARGUMENT
// whatever the store's state), and returns what hands out one page of
// the listing once read whole (store.Page); list names the listing in
// the token, key orders it.
func pager[T any](n int32, token, list string, key func(T) string) (func([]T) ([]T, string, error), error) {
	size, err := listArgs(n, token, defaultPageSize)
	if err != nil {
		return nil, err
	}
	return func(items []T) ([]T, string, error) {
		out, next, err := store.Page(items, key, size, token, list)
		return out, next, refuse(err)
	}, nil
}

// scope is a short digest of what a List request asked beside its page
// (filter, flags, principal): a page token carries it, and a token handed
// out under another scope is refused (AIP-158: a changed request with an
// old token is an error, never a silently different listing).
func scope(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:9])
}

// parseFilter reads a List request's filter (AIP-160 subset,
// internal/listfilter); a refusal is INVALID_ARGUMENT / INVALID_FILTER.
func parseFilter(expr string, fields ...listfilter.Field) (listfilter.Filter, error) {
	f, err := listfilter.Parse(expr, fields...)
	return f, refuse(err)
}

// lowerEnum is an enum value's filter name: "running" for
// SESSION_STATE_RUNNING with prefix "SESSION_STATE_".
func lowerEnum(name, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(name, prefix))
}

// enumNames are the filter names of an enum's values but the unspecified.
func enumNames(names map[int32]string, prefix string) []string {
	var out []string
	for v, n := range names {
		if v != 0 {
			out = append(out, lowerEnum(n, prefix))
		}
	}
	slices.Sort(out)
	return out
}

// sessionFields are what ListSessions filters on (a func: the agents
// register themselves at init).
func sessionFields() []listfilter.Field {
	return []listfilter.Field{
		{Name: "agent", Values: agents.Names()}, {Name: "node"}, {Name: "model"}, {Name: "account"}, {Name: "creator"},
		{Name: "state", Values: enumNames(castv1.SessionState_name, "SESSION_STATE_")},
		{Name: "origin", Values: []string{OriginNative, OriginCast}},
	}
}

// A session's origin, as ListSessions filters on it: adopted from an
// agent's native store, or started (or imported) through cast.
const (
	OriginNative = "native"
	OriginCast   = "cast"
)

func sessionField(s *castv1.Session, field string) []string {
	switch field {
	case "agent":
		return []string{s.Agent}
	case "node":
		return []string{s.Node}
	case "model":
		return []string{s.Model}
	case "account":
		return []string{s.Account}
	case "creator":
		return []string{s.Creator}
	case "state":
		return []string{lowerEnum(s.State.String(), "SESSION_STATE_")}
	case "origin":
		if s.Origin != nil {
			return []string{OriginNative}
		}
		return []string{OriginCast}
	}
	return nil
}

// nodeFields are what ListNodes filters on: label holds when the node
// carries the label.
var nodeFields = []listfilter.Field{{Name: "name"}, {Name: "label"}, {Name: "connected", Values: []string{"true", "false"}}}

func nodeField(n *castv1.Node, field string) []string {
	switch field {
	case "name":
		return []string{n.Name}
	case "label":
		return n.Labels
	case "connected":
		return []string{strconv.FormatBool(n.Connected)}
	}
	return nil
}

// migrationFields are what ListMigrations filters on.
var migrationFields = []listfilter.Field{
	{Name: "target_node"},
	{Name: "state", Values: enumNames(castv1.MigrationState_name, "MIGRATION_STATE_")},
}

func migrationField(m *castv1.Migration, field string) []string {
	switch field {
	case "target_node":
		return []string{m.TargetNode}
	case "state":
		return []string{lowerEnum(m.State.String(), "MIGRATION_STATE_")}
	}
	return nil
}
