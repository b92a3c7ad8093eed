package client

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// maxPages stops a listing whose server keeps handing out tokens (a bug,
// not a big fleet: 10,000 pages of 100).
const maxPages = 10000

// EachPage calls a List RPC with req, then with each next_page_token it
// answers, until a page answers none (AIP-158), and hands every page to
// fn. req is not changed. It is the one loop every whole listing of the
// CLI and the node follows.
func EachPage[Req proto.Message, Resp interface{ GetNextPageToken() string }](ctx context.Context, req Req,
	call func(context.Context, Req, ...grpc.CallOption) (Resp, error), fn func(Resp)) error {
	r := proto.Clone(req).(Req)
	field := r.ProtoReflect().Descriptor().Fields().ByName("page_token")
	if field == nil {
		return fmt.Errorf("%s has no page_token", r.ProtoReflect().Descriptor().FullName())
	}
	for range maxPages {
		resp, err := call(ctx, r)
		if err != nil {
			return err
		}
		fn(resp)
		next := resp.GetNextPageToken()
		if next == "" {
			return nil
		}
		r.ProtoReflect().Set(field, protoreflect.ValueOfString(next))
	}
	return fmt.Errorf("%s: more than %d pages", r.ProtoReflect().Descriptor().FullName(), maxPages)
}

// ListAll reads every page of a List RPC and returns the items of them
// all; items picks a page's.
func ListAll[Req proto.Message, Resp interface{ GetNextPageToken() string }, T any](ctx context.Context, req Req,
	call func(context.Context, Req, ...grpc.CallOption) (Resp, error), items func(Resp) []T) ([]T, error) {
	var out []T
	err := EachPage(ctx, req, call, func(r Resp) { out = append(out, items(r)...) })
	return out, err
}

// AllNodes is every node ListNodes answers for req.
func (c *Client) AllNodes(ctx context.Context, req *castv1.ListNodesRequest) ([]*castv1.Node, error) {
	return ListAll(ctx, req, c.Nodes.ListNodes, (*castv1.ListNodesResponse).GetNodes)
}

// AllMigrations is every migration ListMigrations answers for req.
func (c *Client) AllMigrations(ctx context.Context, req *castv1.ListMigrationsRequest) ([]*castv1.Migration, error) {
	return ListAll(ctx, req, c.Migrations.ListMigrations, (*castv1.ListMigrationsResponse).GetMigrations)
}

// AllAgentChecks is every verdict ListAgentChecks answers for req.
func (c *Client) AllAgentChecks(ctx context.Context, req *castv1.ListAgentChecksRequest) ([]*castv1.AgentCheck, error) {
	return ListAll(ctx, req, c.Agents.ListAgentChecks, (*castv1.ListAgentChecksResponse).GetChecks)
}

// AllTokens is every token ListTokens answers.
func (c *Client) AllTokens(ctx context.Context, req *castv1.ListTokensRequest) ([]*castv1.TokenInfo, error) {
	return ListAll(ctx, req, c.Auth.ListTokens, (*castv1.ListTokensResponse).GetTokens)
}

// AllAccounts is every page of ListAccounts as one answer: every account,
// and the fleet policies (each page carries them all).
func (c *Client) AllAccounts(ctx context.Context, req *castv1.ListAccountsRequest) (*castv1.ListAccountsResponse, error) {
	out := &castv1.ListAccountsResponse{}
	err := EachPage(ctx, req, c.Accounts.ListAccounts, func(r *castv1.ListAccountsResponse) {
		out.Accounts, out.Fleet = append(out.Accounts, r.Accounts...), r.Fleet
	})
	return out, err
}

// AllWorktrees is every page of ListWorktrees as one answer; unanswered
// is the last page's (each page asks the nodes again).
func (c *Client) AllWorktrees(ctx context.Context, req *castv1.ListWorktreesRequest) (*castv1.ListWorktreesResponse, error) {
	out := &castv1.ListWorktreesResponse{}
	err := EachPage(ctx, req, c.Nodes.ListWorktrees, func(r *castv1.ListWorktreesResponse) {
		out.Worktrees, out.Unanswered = append(out.Worktrees, r.Worktrees...), r.Unanswered
	})
	return out, err
}
