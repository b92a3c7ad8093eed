package controlplane_test

import (
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/testharness"
)

// ListSessions, ListNodes and ListMigrations filter on the server (an
// AIP-160 subset); a filter naming an unknown field or value, or using
// what the subset lacks, is INVALID_ARGUMENT / INVALID_FILTER. A filtered
// listing pages like any other.
func TestListFilters(t *testing.T) {
	t.Parallel()
	srv := testharness.StartControlPlane(t, nil)
	c := testharness.Dial(t, srv.Addr())
	testharness.StartNode(t, srv.Addr(), "n1", func(cfg *node.Config) { cfg.Labels = []string{"gpu"} })
	testharness.StartNode(t, srv.Addr(), "n2", nil)
	waitConnected(t, c, "n1", true)
	waitConnected(t, c, "n2", true)
	ctx := ctxT(t)
	byKey := map[string]string{}
	for _, s := range []struct{ key, agent, node string }{
		{"claude1", "claude", "n1"}, {"claude2", "claude", "n2"}, {"codex1", "codex", "n1"}, {"claude3", "claude", "n1"},
	} {
		sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: s.agent, Cwd: "/tmp", Node: s.node})
		if err != nil {
			t.Fatal(err)
		}
		byKey[s.key] = sess.Id
	}
	sessions := func(filter string, size int32) ([]string, error) {
		var ids []string
		err := client.EachPage(ctx, &castv1.ListSessionsRequest{Filter: filter, PageSize: size}, c.Sessions.ListSessions,
			func(r *castv1.ListSessionsResponse) { ids = append(ids, names(r.Sessions, (*castv1.Session).GetId)...) })
		slices.Sort(ids)
		return ids, err
	}
	want := func(keys ...string) []string {
		var ids []string
		for _, k := range keys {
			ids = append(ids, byKey[k])
		}
		slices.Sort(ids)
		return ids
	}
	for _, tc := range []struct {
		filter string
		want   []string
	}{
		{"", want("claude1", "claude2", "codex1", "claude3")},
		{`agent = "claude"`, want("claude1", "claude2", "claude3")},
		{`agent = "claude" AND node = "n1"`, want("claude1", "claude3")},
		{`agent != "claude"`, want("codex1")},
		{`node = "n2" AND state = "idle"`, want("claude2")},
		{`state = "running"`, nil},
	} {
		for _, size := range []int32{0, 1} {
			got, err := sessions(tc.filter, size)
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("ListSessions %q, %d a page: %v, %v; want %v", tc.filter, size, got, err, tc.want)
			}
		}
	}

	// A filtered page is filled from the sessions after it: two a page
	// of claude on n1 holds both (wherever claude2 and codex1 sort between
	// them: ids are random), and its token resumes only that query.
	both, err := c.Sessions.ListSessions(ctx, &castv1.ListSessionsRequest{Filter: `agent = "claude" AND node = "n1"`, PageSize: 2})
	if got := names(both.GetSessions(), (*castv1.Session).GetId); err != nil || !slices.Equal(slices.Sorted(slices.Values(got)), want("claude1", "claude3")) {
		t.Fatalf("a filtered page of 2: %v, %v; want claude1 and claude3", got, err)
	}
	first, err := c.Sessions.ListSessions(ctx, &castv1.ListSessionsRequest{Filter: `agent = "claude"`, PageSize: 2})
	if err != nil || len(first.Sessions) != 2 || first.NextPageToken == "" {
		t.Fatalf("first filtered page: %d sessions, next %q, %v; want 2 and a token", len(first.GetSessions()), first.GetNextPageToken(), err)
	}
	for name, req := range map[string]*castv1.ListSessionsRequest{
		"another filter":    {Filter: `agent = "codex"`, PageSize: 2, PageToken: first.NextPageToken},
		"include_archived":  {Filter: `agent = "claude"`, IncludeArchived: true, PageSize: 2, PageToken: first.NextPageToken},
		"include_subagents": {Filter: `agent = "claude"`, IncludeSubagents: true, PageSize: 2, PageToken: first.NextPageToken},
	} {
		_, err := c.Sessions.ListSessions(ctx, req)
		if status.Code(err) != codes.InvalidArgument || client.ReasonOf(err) != "INVALID_PAGE_TOKEN" {
			t.Errorf("ListSessions with %s and the first page's token: %v (%s), want INVALID_PAGE_TOKEN", name, err, client.ReasonOf(err))
		}
	}
	firstNodes, err := c.Nodes.ListNodes(ctx, &castv1.ListNodesRequest{Filter: `connected = true`, PageSize: 1})
	if err != nil || firstNodes.NextPageToken == "" {
		t.Fatalf("first node page: %v, %v", firstNodes, err)
	}
	_, err = c.Nodes.ListNodes(ctx, &castv1.ListNodesRequest{Filter: `label = "gpu"`, PageSize: 1, PageToken: firstNodes.NextPageToken})
	if client.ReasonOf(err) != "INVALID_PAGE_TOKEN" {
		t.Errorf("ListNodes with another filter and a token: %v, want INVALID_PAGE_TOKEN", err)
	}

	nodes := func(filter string) ([]string, error) {
		list, err := c.AllNodes(ctx, &castv1.ListNodesRequest{Filter: filter})
		return names(list, (*castv1.Node).GetName), err
	}
	for filter, want := range map[string][]string{
		`label = "gpu"`:                    {"n1"},
		`label != "gpu"`:                   {"n2"},
		`connected = true`:                 {"n1", "n2"},
		`connected = false`:                nil,
		`name = "n2" AND connected = true`: {"n2"},
	} {
		if got, err := nodes(filter); err != nil || !slices.Equal(got, want) {
			t.Errorf("ListNodes %q: %v, %v; want %v", filter, got, err, want)
		}
	}

	m, err := c.Migrations.StartMigration(ctx, &castv1.StartMigrationRequest{To: "n2", SessionIds: []string{byKey["codex1"]}, SkipWorktree: true})
	if err != nil {
		t.Fatal(err)
	}
	waitMigration(t, c, m.Id)
	for filter, want := range map[string][]string{
		`state = "succeeded"`:                         {m.Id},
		`state = "running"`:                           nil,
		`target_node = "n2" AND state != "cancelled"`: {m.Id},
	} {
		list, err := c.AllMigrations(ctx, &castv1.ListMigrationsRequest{Filter: filter})
		if got := names(list, (*castv1.Migration).GetId); err != nil || !slices.Equal(got, want) {
			t.Errorf("ListMigrations %q: %v, %v; want %v", filter, got, err, want)
		}
	}

	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"unknown session field", func() error { _, err := sessions(`colour = "red"`, 0); return err }},
		{"unknown agent", func() error { _, err := sessions(`agent = "bogus"`, 0); return err }},
		{"unknown session state", func() error { _, err := sessions(`state = "sleeping"`, 0); return err }},
		{"OR", func() error { _, err := sessions(`agent = "claude" OR agent = "codex"`, 0); return err }},
		{"unclosed quote", func() error { _, err := sessions(`agent = "claude`, 0); return err }},
		{"node field on sessions' listing", func() error { _, err := sessions(`label = "gpu"`, 0); return err }},
		{"ready is not a node field", func() error { _, err := nodes(`ready = true`); return err }},
		{"connected is a bool", func() error { _, err := nodes(`connected = yes`); return err }},
		{"migration state", func() error {
			_, err := c.Migrations.ListMigrations(ctx, &castv1.ListMigrationsRequest{Filter: `state = "idle"`})
			return err
		}},
	} {
		err := tc.call()
		if status.Code(err) != codes.InvalidArgument || client.ReasonOf(err) != "INVALID_FILTER" {
			t.Errorf("%s: got %v (%s), want INVALID_ARGUMENT / INVALID_FILTER", tc.name, err, client.ReasonOf(err))
		}
	}
}

// GetSession takes session_id, as every other request does, and still
// the deprecated id an older client sends; session_id wins.
func TestGetSessionBySessionID(t *testing.T) {
	t.Parallel()
	c, _ := setup(t)
	ctx := ctxT(t)
	a, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		req  *castv1.GetSessionRequest
		want string
	}{
		"session_id":     {&castv1.GetSessionRequest{SessionId: a.Id}, a.Id},
		"id (old)":       {&castv1.GetSessionRequest{Id: a.Id}, a.Id},
		"both: new wins": {&castv1.GetSessionRequest{Id: a.Id, SessionId: b.Id}, b.Id},
	} {
		got, err := c.Sessions.GetSession(ctx, tc.req)
		if err != nil || got.Id != tc.want {
			t.Errorf("%s: got %v, %v; want %s", name, got.GetId(), err, tc.want)
		}
	}
	if _, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("neither: got %v, want INVALID_ARGUMENT", err)
	}
}
