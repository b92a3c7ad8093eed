package controlplane_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/testharness"
)

// pageOf is one page of a listing: its items' keys and next_page_token.
type pageOf func(ctx context.Context, size int32, token string) (keys []string, next string, err error)

// pageThrough reads a listing two items a page and checks AIP-158: no page
// over its size, more than one page, every item once, the order of one
// whole read. between runs after the first page, with its keys (an insert
// that must not shift the pages).
func pageThrough(t *testing.T, list pageOf, between func(first []string)) []string {
	t.Helper()
	ctx := ctxT(t)
	whole, next, err := list(ctx, 0, "")
	if err != nil || next != "" {
		t.Fatalf("one page of the default size: next %q, %v", next, err)
	}
	var got []string
	tok, pages := "", 0
	for {
		keys, next, err := list(ctx, 2, tok)
		if err != nil {
			t.Fatalf("page %d: %v", pages+1, err)
		}
		if len(keys) > 2 {
			t.Fatalf("page %d holds %d items, more than its size 2", pages+1, len(keys))
		}
		got, pages = append(got, keys...), pages+1
		if pages == 1 && between != nil {
			between(keys)
		}
		if tok = next; tok == "" {
			break
		}
	}
	if pages < 2 {
		t.Fatalf("%d items came in %d page, want more than one", len(got), pages)
	}
	// An item inserted after the first page may show or not (it sorts
	// where it sorts); every item of the whole read shows once, in order.
	kept := slices.DeleteFunc(slices.Clone(got), func(k string) bool { return !slices.Contains(whole, k) })
	if !slices.Equal(kept, whole) {
		t.Fatalf("paged %v, want %v (one read)", got, whole)
	}
	return got
}

// invalidToken checks a forged token and another listing's token are
// INVALID_ARGUMENT / INVALID_PAGE_TOKEN.
func invalidToken(t *testing.T, list pageOf, foreign string) {
	t.Helper()
	for name, tok := range map[string]string{"forged": "bm9wZQ", "another listing's": foreign} {
		_, _, err := list(ctxT(t), 2, tok)
		if status.Code(err) != codes.InvalidArgument || client.ReasonOf(err) != "INVALID_PAGE_TOKEN" {
			t.Errorf("%s token: got %v (%s), want INVALID_ARGUMENT / INVALID_PAGE_TOKEN", name, err, client.ReasonOf(err))
		}
	}
}

func names[T any](items []T, name func(T) string) []string {
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, name(it))
	}
	return out
}

// Every List RPC pages (AIP-158) over real gRPC and etcd: three nodes,
// five tokens, three accounts, three agent verdicts, three migrations and
// three worktrees, read two a page.
func TestEveryListPages(t *testing.T) {
	isolateGit(t)
	srv := testharness.StartControlPlane(t, nil)
	c := testharness.Dial(t, srv.Addr())
	for i, n := range []string{"n1", "n2", "n3"} {
		testharness.StartNode(t, srv.Addr(), n, func(cfg *node.Config) { cfg.Labels = []string{fmt.Sprint("rack", i%2)} })
		waitConnected(t, c, n, true)
	}
	ctx := ctxT(t)
	// A token listing's page token, to hand to every other listing.
	tokens := func(ctx context.Context, size int32, tok string) ([]string, string, error) {
		r, err := c.Auth.ListTokens(ctx, &castv1.ListTokensRequest{PageSize: size, PageToken: tok})
		return names(r.GetTokens(), (*castv1.TokenInfo).GetName), r.GetNextPageToken(), err
	}
	for i := range 5 {
		if _, err := c.Auth.CreateToken(ctx, &castv1.CreateTokenRequest{Name: fmt.Sprint("t", i), Role: castv1.Role_ROLE_USER}); err != nil {
			t.Fatal(err)
		}
	}
	_, foreign, err := tokens(ctx, 1, "")
	if err != nil || foreign == "" {
		t.Fatalf("tokens, one a page: next %q, %v", foreign, err)
	}

	t.Run("tokens", func(t *testing.T) {
		inserted := ""
		got := pageThrough(t, tokens, func(first []string) {
			// Sorts inside the first page, before every key left: an
			// offset would now skip one.
			inserted = first[0] + "0"
			if _, err := c.Auth.CreateToken(ctx, &castv1.CreateTokenRequest{Name: inserted, Role: castv1.Role_ROLE_USER}); err != nil {
				t.Fatal(err)
			}
		})
		if !slices.Contains(got, "t4") || slices.Contains(got, inserted) {
			t.Fatalf("paged %v: %s, made after the first page, sorts into it", got, inserted)
		}
		for _, tk := range mustTokens(t, c) {
			if tk.CreateTime == nil || tk.CreateTime.AsTime().Unix() != tk.CreateTimeUnix {
				t.Fatalf("token %s: create_time %v, create_time_unix %d (both filled)", tk.Name, tk.CreateTime, tk.CreateTimeUnix)
			}
		}
	})
	t.Run("nodes", func(t *testing.T) {
		nodes := func(ctx context.Context, size int32, tok string) ([]string, string, error) {
			r, err := c.Nodes.ListNodes(ctx, &castv1.ListNodesRequest{PageSize: size, PageToken: tok})
			return names(r.GetNodes(), (*castv1.Node).GetName), r.GetNextPageToken(), err
		}
		if got := pageThrough(t, nodes, nil); !slices.Equal(got, []string{"n1", "n2", "n3"}) {
			t.Fatalf("paged %v", got)
		}
		invalidToken(t, nodes, foreign)
	})
	t.Run("accounts", func(t *testing.T) {
		for _, n := range []string{"a", "b", "c"} {
			if _, err := c.Accounts.PutAccount(ctx, &castv1.PutAccountRequest{Name: n, Agent: "claude", Credential: []byte(`{"claudeAiOauth":{"accessToken":"sk-ant-oat01-x"}}`)}); err != nil {
				t.Fatal(err)
			}
		}
		accounts := func(ctx context.Context, size int32, tok string) ([]string, string, error) {
			r, err := c.Accounts.ListAccounts(ctx, &castv1.ListAccountsRequest{PageSize: size, PageToken: tok})
			return names(r.GetAccounts(), (*castv1.Account).GetName), r.GetNextPageToken(), err
		}
		if got := pageThrough(t, accounts, nil); !slices.Equal(got, []string{"a", "b", "c"}) {
			t.Fatalf("paged %v", got)
		}
		invalidToken(t, accounts, foreign)
	})
	t.Run("agent checks", func(t *testing.T) {
		var checks []*castv1.AgentCheck
		for _, cp := range []string{"read", "resume", "write"} {
			checks = append(checks, &castv1.AgentCheck{Agent: "codex", Version: "1.0.0", Capability: cp, Passed: true})
		}
		if _, err := c.Agents.RecordAgentChecks(ctx, &castv1.RecordAgentChecksRequest{Checks: checks}); err != nil {
			t.Fatal(err)
		}
		list := func(ctx context.Context, size int32, tok string) ([]string, string, error) {
			r, err := c.Agents.ListAgentChecks(ctx, &castv1.ListAgentChecksRequest{PageSize: size, PageToken: tok})
			return names(r.GetChecks(), (*castv1.AgentCheck).GetCapability), r.GetNextPageToken(), err
		}
		if got := pageThrough(t, list, nil); !slices.Equal(got, []string{"read", "resume", "write"}) {
			t.Fatalf("paged %v", got)
		}
		invalidToken(t, list, foreign)
	})
	t.Run("migrations", func(t *testing.T) {
		var ids []string
		for range 3 {
			sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp", Node: "n1"})
			if err != nil {
				t.Fatal(err)
			}
			m, err := c.Migrations.StartMigration(ctx, &castv1.StartMigrationRequest{To: "n2", SessionIds: []string{sess.Id}, SkipWorktree: true})
			if err != nil {
				t.Fatal(err)
			}
			waitMigration(t, c, m.Id)
			ids = append([]string{m.Id}, ids...) // newest first
		}
		list := func(ctx context.Context, size int32, tok string) ([]string, string, error) {
			r, err := c.Migrations.ListMigrations(ctx, &castv1.ListMigrationsRequest{PageSize: size, PageToken: tok})
			return names(r.GetMigrations(), (*castv1.Migration).GetId), r.GetNextPageToken(), err
		}
		if got := pageThrough(t, list, nil); !slices.Equal(got, ids) {
			t.Fatalf("paged %v, want newest first %v", got, ids)
		}
		invalidToken(t, list, foreign)
	})
	t.Run("worktrees", func(t *testing.T) {
		repo := filepath.Join(t.TempDir(), "repo")
		gitRepo(t, repo)
		for _, b := range []string{"w1", "w2", "w3"} {
			sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: repo, Node: "n3"})
			if err != nil {
				t.Fatal(err)
			}
			// The node makes the worktree now (no turn needed).
			if _, err := c.Sessions.SetWorkspace(ctx, &castv1.SetWorkspaceRequest{SessionId: sess.Id,
				Target: &castv1.SetWorkspaceRequest_Worktree{Worktree: &castv1.WorktreeTarget{Branch: b}}}); err != nil {
				t.Fatal(err)
			}
		}
		list := func(ctx context.Context, size int32, tok string) ([]string, string, error) {
			r, err := c.Nodes.ListWorktrees(ctx, &castv1.ListWorktreesRequest{Node: "n3", PageSize: size, PageToken: tok})
			return names(r.GetWorktrees(), (*castv1.Worktree).GetBranch), r.GetNextPageToken(), err
		}
		if got := pageThrough(t, list, nil); len(got) != 3 {
			t.Fatalf("paged %v", got)
		}
		invalidToken(t, list, foreign)
	})
}

func mustTokens(t *testing.T, c *client.Client) []*castv1.TokenInfo {
	t.Helper()
	all, err := c.AllTokens(ctxT(t), &castv1.ListTokensRequest{PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// A page token resumes only the listing that handed it out (AIP-158): the
// agent checks or the accounts of one agent, not another's. A token of
// claude's resumed codex's listing from its start (claude's keys sort
// before codex's), and one of codex's resumed claude's past its end: a
// different listing, never an error.
func TestPageTokenKeepsItsAgent(t *testing.T) {
	t.Parallel()
	srv := testharness.StartControlPlane(t, nil)
	c := testharness.Dial(t, srv.Addr())
	ctx := ctxT(t)
	var checks []*castv1.AgentCheck
	for _, agent := range []string{"claude", "codex"} {
		for _, cp := range []string{"read", "resume", "write"} {
			checks = append(checks, &castv1.AgentCheck{Agent: agent, Version: "1.0.0", Capability: cp, Passed: true})
		}
	}
	if _, err := c.Agents.RecordAgentChecks(ctx, &castv1.RecordAgentChecksRequest{Checks: checks}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b"} {
		if _, err := c.Accounts.PutAccount(ctx, &castv1.PutAccountRequest{Name: n, Agent: "claude", Credential: []byte(`{"claudeAiOauth":{"accessToken":"sk-ant-oat01-x"}}`)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		list func(agent, token string) (string, error) // next_page_token
	}{
		{"agent checks", func(agent, token string) (string, error) {
			r, err := c.Agents.ListAgentChecks(ctx, &castv1.ListAgentChecksRequest{Agent: agent, PageSize: 1, PageToken: token})
			return r.GetNextPageToken(), err
		}},
		{"accounts", func(agent, token string) (string, error) {
			r, err := c.Accounts.ListAccounts(ctx, &castv1.ListAccountsRequest{Agent: agent, PageSize: 1, PageToken: token})
			return r.GetNextPageToken(), err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, err := tc.list("claude", "")
			if err != nil || next == "" {
				t.Fatalf("claude's first page: next %q, %v", next, err)
			}
			if _, err := tc.list("codex", next); status.Code(err) != codes.InvalidArgument || client.ReasonOf(err) != "INVALID_PAGE_TOKEN" {
				t.Fatalf("codex's listing with claude's token: %v (%s), want INVALID_ARGUMENT / INVALID_PAGE_TOKEN", err, client.ReasonOf(err))
			}
		})
	}
}
