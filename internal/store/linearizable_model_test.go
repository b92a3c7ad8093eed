package store_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// The porcupine model of one session as its clients see it: who owns it
// (node and token) and which client ids its transcript holds, in seq order.

type linKind int

const (
	linAppend  linKind = iota // user Append of one message
	linOwner                  // Owner read
	linList                   // ListMessages of the whole transcript
	linMigrate                // fence + commit to Target, notice NoticeCID
)

type linIn struct {
	Kind      linKind
	CID       string // linAppend
	Target    string // linMigrate
	NoticeCID string // linMigrate
}

// linOut is an op's result. Unknown marks an op whose outcome the client
// never learned (timeout, cut connection): it may or may not have happened.
type linOut struct {
	Unknown bool
	Seq     int64    // linAppend
	Node    string   // linOwner
	Token   int64    // linOwner; linMigrate: the new token
	CIDs    []string // linList
	Moved   bool     // linMigrate: false = refused, nothing changed
}

// linState is comparable, so porcupine can merge equal states: the
// transcript is its client ids joined by spaces.
type linState struct {
	Owner string
	Token int64
	Log   string
}

func (s linState) cids() []string {
	if s.Log == "" {
		return nil
	}
	return strings.Fields(s.Log)
}

func (s linState) with(cid string) linState {
	s.Log = strings.TrimSpace(s.Log + " " + cid)
	return s
}

// linModel is nondeterministic only for unknown outcomes: an append that
// timed out leads to both the state with it and the state without it.
func linModel(owner string, token int64) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{linState{Owner: owner, Token: token}} },
		Step: func(state, input, output any) []any {
			return linStep(state.(linState), input.(linIn), output.(linOut))
		},
		Equal: func(a, b any) bool { return a.(linState) == b.(linState) },
		DescribeOperation: func(input, output any) string {
			return describeLin(input.(linIn), output.(linOut))
		},
		DescribeState: func(state any) string {
			s := state.(linState)
			return fmt.Sprintf("owner %s@%d, %d msgs", s.Owner, s.Token, len(s.cids()))
		},
	}
	return nm.ToModel()
}

func linStep(s linState, in linIn, out linOut) []any {
	switch in.Kind {
	case linAppend:
		cids := s.cids()
		if i := slices.Index(cids, in.CID); i >= 0 { // idempotent on client id
			if out.Unknown || out.Seq == int64(i+1) {
				return []any{s}
			}
			return nil
		}
		next := s.with(in.CID)
		switch {
		case out.Unknown:
			return []any{s, next}
		case out.Seq == int64(len(cids)+1):
			return []any{next}
		}
		return nil
	case linOwner:
		if out.Node == s.Owner && out.Token == s.Token {
			return []any{s}
		}
		return nil
	case linList:
		if slices.Equal(out.CIDs, s.cids()) {
			return []any{s}
		}
		return nil
	case linMigrate:
		if !out.Moved {
			return []any{s}
		}
		if out.Token <= s.Token { // a commit moves the token, only up
			return nil
		}
		next := s.with(in.NoticeCID)
		next.Owner, next.Token = in.Target, out.Token
		return []any{next}
	}
	return nil
}

func describeLin(in linIn, out linOut) string {
	res := ""
	switch in.Kind {
	case linAppend:
		res = fmt.Sprintf("append(%s) -> %d", in.CID[len(in.CID)-6:], out.Seq)
	case linOwner:
		res = fmt.Sprintf("owner() -> %s@%d", out.Node, out.Token)
	case linList:
		res = fmt.Sprintf("list() -> %d msgs", len(out.CIDs))
	case linMigrate:
		res = fmt.Sprintf("migrate(%s) -> moved=%v token %d", in.Target, out.Moved, out.Token)
	}
	if out.Unknown {
		res += " (unknown outcome)"
	}
	return res
}

// TestLinearizableModelRejects makes sure the checker can fail: histories
// that no order of the ops explains must come out Illegal, and the
// unknown-outcome rule must not swallow a wrong seq.
func TestLinearizableModelRejects(t *testing.T) {
	app := func(cid string, seq int64, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: 0, Input: linIn{Kind: linAppend, CID: cid}, Output: linOut{Seq: seq}, Call: call, Return: ret}
	}
	list := func(call, ret int64, cids ...string) porcupine.Operation {
		return porcupine.Operation{ClientId: 1, Input: linIn{Kind: linList}, Output: linOut{CIDs: cids}, Call: call, Return: ret}
	}
	unknown := porcupine.Operation{ClientId: 2, Input: linIn{Kind: linAppend, CID: "cidzzzzzz"}, Output: linOut{Unknown: true}, Call: 0, Return: 100}
	tests := []struct {
		name string
		want porcupine.CheckResult
		ops  []porcupine.Operation
	}{
		{"two appends, one seq", porcupine.Illegal, []porcupine.Operation{app("cidaaaaaa", 1, 0, 1), app("cidbbbbbb", 1, 2, 3)}},
		{"read misses an acked append", porcupine.Illegal, []porcupine.Operation{app("cidaaaaaa", 1, 0, 1), list(2, 3)}},
		{"read reorders", porcupine.Illegal, []porcupine.Operation{app("cidaaaaaa", 1, 0, 1), app("cidbbbbbb", 2, 2, 3), list(4, 5, "cidbbbbbb", "cidaaaaaa")}},
		{"retry gets another seq", porcupine.Illegal, []porcupine.Operation{app("cidaaaaaa", 1, 0, 1), app("cidaaaaaa", 2, 2, 3)}},
		{"token goes down", porcupine.Illegal, []porcupine.Operation{{Input: linIn{Kind: linMigrate, Target: "n2", NoticeCID: "migrated-x"}, Output: linOut{Moved: true, Token: 5}, Call: 0, Return: 1}}},
		{"unknown append seen", porcupine.Ok, []porcupine.Operation{unknown, app("cidaaaaaa", 2, 1, 2), list(3, 4, "cidzzzzzz", "cidaaaaaa")}},
		{"unknown append not seen", porcupine.Ok, []porcupine.Operation{unknown, app("cidaaaaaa", 1, 1, 2), list(3, 4, "cidaaaaaa")}},
		{"unknown append, wrong seq after", porcupine.Illegal, []porcupine.Operation{unknown, app("cidaaaaaa", 3, 1, 2)}},
	}
	for _, tc := range tests {
		if got := porcupine.CheckOperationsTimeout(linModel("n1", 10), tc.ops, 5*time.Second); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
