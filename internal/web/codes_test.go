package web_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/cookiejar"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/client"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// grpcCall calls "Service/Method" of c with the request body holds (its
// protojson) and returns the code's Connect name and the reason.
func grpcCall(t *testing.T, c *client.Client, method, body string) (string, string) {
	t.Helper()
	svc, name, _ := strings.Cut(method, "/")
	stub := reflect.ValueOf(c).Elem().FieldByNameFunc(func(f string) bool {
		return reflect.ValueOf(c).Elem().FieldByName(f).Type().Name() == svc+"Client"
	})
	m := stub.MethodByName(name)
	req := reflect.New(m.Type().In(1).Elem()).Interface().(proto.Message)
	if err := protojson.Unmarshal([]byte(body), req); err != nil {
		t.Fatalf("%s %s: %v", method, body, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := m.Call([]reflect.Value{reflect.ValueOf(ctx), reflect.ValueOf(req)})
	err, _ := out[1].Interface().(error)
	if err == nil {
		return "ok", ""
	}
	return connectName(status.Code(err).String()), client.ReasonOf(err)
}

// connectName is a gRPC code's Connect spelling: "InvalidArgument" is
// "invalid_argument".
func connectName(code string) string {
	var b strings.Builder
	for i, r := range code {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// webCall is the same call through the web listener's Connect JSON.
func webCall(t *testing.T, browser *http.Client, base, method, body string) (string, string) {
	t.Helper()
	code, raw := connectCall(t, browser, base, method, body, base)
	if code == http.StatusOK {
		return "ok", ""
	}
	var e struct {
		Code    string
		Details []struct{ Type, Value string }
	}
	if err := json.Unmarshal([]byte(raw), &e); err != nil {
		t.Fatalf("%s: %d %s", method, code, raw)
	}
	reason := ""
	for _, d := range e.Details {
		var info errdetails.ErrorInfo
		b, _ := base64.RawStdEncoding.DecodeString(strings.TrimRight(d.Value, "="))
		if d.Type == "google.rpc.ErrorInfo" && proto.Unmarshal(b, &info) == nil {
			reason = info.Reason
		}
	}
	return e.Code, reason
}

// A refusal reaches the web app (Connect JSON through the transcoder) with
// the code and ErrorInfo reason a gRPC client gets for the same request,
// for an admin and a user: bad filters and page tokens, unknown sessions,
// another user's session, an admin-only call.
func TestWebRefusalsMatchGRPC(t *testing.T) {
	srv, auth := startWeb(t)
	base := srv.WebURL()
	admin := testharness.DialServer(t, srv)
	ctx := context.Background()
	tok, err := auth.CreateToken(ctx, &castv1.CreateTokenRequest{Name: "alice", Role: castv1.Role_ROLE_USER})
	if err != nil {
		t.Fatal(err)
	}
	alice := testharness.DialAs(t, srv.Addr(), tok.Token)
	testharness.StartNode(t, srv.Addr(), "n1", nil)
	testharness.WaitConnected(t, admin, "n1", true)
	adminSess, err := admin.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: "/tmp", Text: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Sessions.SendMessage(ctx, &castv1.SendMessageRequest{SessionId: adminSess.Id, Text: "2"}); err != nil {
		t.Fatal(err)
	}
	page, err := admin.Sessions.ListMessages(ctx, &castv1.ListMessagesRequest{SessionId: adminSess.Id, PageSize: 1})
	if err != nil || page.NextPageToken == "" {
		t.Fatalf("a message page token: %v", err)
	}
	browserOf := func(c *client.Client) *http.Client {
		resp, err := c.Auth.CreateWebLogin(ctx, &castv1.CreateWebLoginRequest{})
		if err != nil {
			t.Fatal(err)
		}
		jar, _ := cookiejar.New(nil)
		b := &http.Client{Jar: jar}
		testharness.OpenLoginLink(t, b, resp.Url).Body.Close()
		return b
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	rows := []struct{ method, body, code, reason string }{
		{"SessionService/ListSessions", `{"filter":"bogus = \"x\""}`, "invalid_argument", "INVALID_FILTER"},
		{"SessionService/ListSessions", `{"filter":"state = \"nope\""}`, "invalid_argument", "INVALID_FILTER"},
		{"SessionService/ListSessions", `{"filter":"agent = claude OR agent = codex"}`, "invalid_argument", "INVALID_FILTER"},
		{"SessionService/ListSessions", `{"pageToken":"bm90IGEgdG9rZW4"}`, "invalid_argument", "INVALID_PAGE_TOKEN"},
		{"SessionService/ListSessions", `{"pageToken":` + q(page.NextPageToken) + `}`, "invalid_argument", "INVALID_PAGE_TOKEN"},
		{"SessionService/ListSessions", `{"pageSize":-1}`, "invalid_argument", "INVALID_ARGUMENT"},
		{"NodeService/ListNodes", `{"filter":"name ~ \"x\""}`, "invalid_argument", "INVALID_FILTER"},
		{"MigrationService/ListMigrations", `{"pageToken":` + q(page.NextPageToken) + `}`, "invalid_argument", "INVALID_PAGE_TOKEN"},
		{"SessionService/GetSession", `{"sessionId":"nosuch1"}`, "not_found", "NOT_FOUND"},
	}
	users := []struct {
		who   string
		c     *client.Client
		extra []struct{ method, body, code, reason string }
	}{
		{"admin", admin, []struct{ method, body, code, reason string }{
			// A page token passed with another start_seq.
			{"SessionService/ListMessages", `{"sessionId":` + q(adminSess.Id) + `,"startSeq":"2","pageToken":` + q(page.NextPageToken) + `}`, "invalid_argument", "INVALID_PAGE_TOKEN"},
		}},
		{"alice", alice, []struct{ method, body, code, reason string }{
			{"SessionService/GetSession", `{"sessionId":` + q(adminSess.Id) + `}`, "permission_denied", "SESSION_NOT_YOURS"},
			{"AccountService/ListAccounts", `{}`, "permission_denied", "PERMISSION_DENIED"},
			{"SessionService/ListMessages", `{"sessionId":` + q(adminSess.Id) + `}`, "permission_denied", "SESSION_NOT_YOURS"},
			{"NodeService/ProbeNode", `{"node":"n1"}`, "permission_denied", "PERMISSION_DENIED"},
		}},
	}
	for _, u := range users {
		browser := browserOf(u.c)
		for _, r := range append(rows, u.extra...) {
			gc, gr := grpcCall(t, u.c, r.method, r.body)
			wc, wr := webCall(t, browser, base, r.method, r.body)
			if gc != r.code || gr != r.reason || wc != gc || wr != gr {
				t.Errorf("%s %s %s: gRPC %s %s, web %s %s; want %s %s", u.who, r.method, r.body, gc, gr, wc, wr, r.code, r.reason)
			}
		}
	}
}
