package e2e

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/ids"
	"github.com/cast-dev/cast/internal/testharness"
	"github.com/cast-dev/cast/internal/transcript"
	"github.com/cast-dev/cast/internal/wire"
)

// chromium is Debian's browser (.ci/install-debs.sh installs it); the
// test drives it with playwright-core from the web app's node_modules.
const chromium = "/usr/bin/chromium"

// The web timeline in a real browser against the real control plane, a
// node process and the real CLIs on the fake model (internal/web/app/e2e/
// drive.mjs): sign in with `cast web --print`'s one-time link, find the
// session in the inbox, send a message and see the turn arrive live,
// approve a permission, see Cursor labelled "can't rebuild history" and
// its switch refused, fork onto Codex (a stub, then a row), switch to
// Codex from the panel and see the divider, hand off to Claude, drain the
// node onto a spare from the fleet page and follow the migration, the
// accounts page, the same session on a phone-sized screen, signing out,
// and signing in at an OIDC issuer as a user who sees none of the admin's
// sessions. Screenshots of each page land in the test's temp dir (or
// CAST_WEB_SHOTS). Then the store must hold what the page did.
func TestWebTimeline(t *testing.T) {
	t.Parallel()
	app := browserApp(t)
	iss := testharness.StartOIDCIssuer(t)
	r := newTurnRigWith(t, func(c *controlplane.Config, _ string) {
		c.Web.Listen, c.Web.Plain = "127.0.0.1:0", true // as --dev
		c.Auth.OIDC.Issuer, c.Auth.OIDC.ClientID = iss.URL, "cast-web"
	}, "claude", "codex", "cursor")
	// Claude Code must ask before running touch.
	settings := filepath.Join(agenttest.NativeHome(r.homes["claude"], "claude"), "settings.json")
	if err := os.WriteFile(settings, []byte(`{"permissions":{"ask":["Bash(touch:*)"]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cwd := t.TempDir()
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: cwd, Title: "web timeline", Text: "first turn WEB-0"})
	if err != nil {
		t.Fatal(err)
	}
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)

	big := bigSession(t, r, 10000)
	c := cli{t: t, bin: filepath.Join(testharness.Binaries(t), "cast"), env: []string{"CAST_ADDR=" + r.addr}}
	link := strings.TrimSpace(c.must("web", "--print"))
	if !strings.HasPrefix(link, r.srv.WebURL()+"/auth/login?code=") {
		t.Fatalf("cast web --print: %q", link)
	}
	// A spare node the page drains the first one onto.
	spare := append([]string(nil), r.nodeArgs...)
	for i := range spare {
		switch spare[i] {
		case "--name":
			spare[i+1] = "spare"
		case "--data-dir":
			spare[i+1] = t.TempDir()
		}
	}
	testharness.StartProc(t, filepath.Join(testharness.Binaries(t), "node"), spare...)
	testharness.WaitFor(t, 30*time.Second, "the spare node connected", func() bool {
		resp, err := r.c.Nodes.ListNodes(ctx, &castv1.ListNodesRequest{})
		return err == nil && len(resp.Nodes) == 2 && resp.Nodes[0].Connected && resp.Nodes[1].Connected
	})
	shots := t.TempDir() // CAST_WEB_SHOTS=DIR keeps them after the test
	if dir := os.Getenv("CAST_WEB_SHOTS"); dir != "" {
		shots = dir
	}
	ctxRun, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctxRun, "node", filepath.Join(app, "e2e", "drive.mjs"))
	cmd.Dir = app
	newCwd := t.TempDir()
	cmd.Env = append(testharness.ScratchEnv(t), "CAST_WEB_LOGIN="+link, "CAST_WEB_SESSION="+sess.Id, "CAST_WEB_BIG="+big, "CAST_WEB_NEW_CWD="+newCwd,
		"CAST_WEB_OIDC_EMAIL=alice@example.com", "CAST_WEB_SHOTS="+shots, "CHROMIUM="+chromium, "CAST_WEB_PROFILE="+t.TempDir())
	out, err := cmd.CombinedOutput()
	t.Logf("drive.mjs:\n%s", out)
	t.Logf("screenshots: %s", shots)
	if err != nil {
		t.Fatalf("the browser run failed: %v", err)
	}

	// What the page did is in the store.
	archived, err := r.c.Sessions.ListSessions(ctx, &castv1.ListSessionsRequest{IncludeArchived: true})
	if err != nil {
		t.Fatal(err)
	}
	started := 0
	for _, s := range archived.Sessions {
		if s.Cwd == newCwd && s.Agent == "claude" && s.Archived {
			started++
		}
	}
	if started != 1 {
		t.Fatalf("%d archived Claude sessions in the folder the page started one in; want 1", started)
	}
	if _, err := os.Stat(filepath.Join(cwd, "web-approved.txt")); err != nil {
		t.Fatalf("the tool approved in the page did not run: %v", err)
	}
	got, err := r.c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{SessionId: sess.Id})
	if err != nil || got.Agent != "codex" || got.Node != "spare" {
		t.Fatalf("after the page's switch and drain: %v %v", got, err)
	}
	var divider, refusedCursor bool
	for _, m := range r.messages(sess.Id) {
		divider = divider || m.NoticeType == "agent_switch" && strings.Contains(m.Text, "Now using Codex")
		refusedCursor = refusedCursor || strings.Contains(m.Text, "Cursor")
	}
	if !divider || refusedCursor {
		t.Fatalf("divider drawn: %v; a Cursor switch left a trace: %v", divider, refusedCursor)
	}
	list, err := r.c.Sessions.ListSessions(ctx, &castv1.ListSessionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	forks, handoffs := 0, 0
	for _, s := range list.Sessions {
		if s.ParentId == sess.Id && s.Agent == "codex" {
			forks++
		}
		if s.HandoffFrom == sess.Id && s.Agent == "claude" {
			handoffs++
		}
	}
	if forks != 1 || handoffs != 1 {
		t.Fatalf("%d codex forks and %d claude handoffs of the session; the page made one each", forks, handoffs)
	}
	for _, name := range []string{"inbox", "timeline", "permission", "switched", "fleet", "accounts", "big-session", "phone-inbox", "phone-timeline", "signed-out", "oidc-user"} {
		if _, err := os.Stat(filepath.Join(shots, name+".png")); err != nil {
			t.Errorf("no screenshot of %s: %v", name, err)
		}
	}
}

// browserApp is the web app's folder, once the browser its scripts drive
// (app/e2e) is there: a missing one fails the test, never skips it.
func browserApp(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("%s is missing: install Debian's chromium (apt-get install -y chromium, or bash .ci/install-debs.sh)", chromium)
	}
	app := filepath.Join(testharness.RepoRoot(t), "internal", "web", "app")
	if _, err := os.Stat(filepath.Join(app, "node_modules", "playwright-core")); err != nil {
		t.Fatalf("playwright-core is missing: run `npm ci` in %s (make test does: .ci/install-web.sh)", app)
	}
	return app
}

// The open timeline keeps its live updates through a control plane
// restart (the stream ends Unavailable, and the next ones fail until the
// replica is back) and a dropped connection (cut at a proxy between the
// browser and the web listener): a message added after each appears in
// the page without a reload, once, with every stored message drawn once
// (internal/web/app/e2e/resume.mjs). The page said it was reconnecting,
// and says so no more.
func TestWebTimelineResumesLiveUpdates(t *testing.T) {
	t.Parallel()
	app := browserApp(t)
	dir, addr, webAddr := filepath.Join(t.TempDir(), "etcd"), freeAddr(t), freeAddr(t)
	// The same data and ports each time it starts: a replica restarted.
	cfg := func(c *controlplane.Config) {
		c.DataDir, c.Listen = dir, addr
		c.Web.Listen, c.Web.Plain = webAddr, true // as --dev
	}
	srv := testharness.StartControlPlane(t, cfg)
	c := testharness.Dial(t, addr)
	ctx := context.Background()
	testharness.StartNode(t, addr, "n1", nil)
	testharness.WaitFor(t, 30*time.Second, "node n1 connected", func() bool { return testharness.NodeConnectedSince(c, "n1", time.Time{}) })
	// An import: nothing runs, so the session holds only what the test adds.
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Node: "n1", Cwd: t.TempDir(), HistoryMessages: 1})
	if err != nil {
		t.Fatal(err)
	}
	add := func(kind castv1.MessageKind, text string) {
		t.Helper()
		if _, err := c.Sessions.AppendMessages(ctx, &castv1.AppendMessagesRequest{SessionId: sess.Id,
			Messages: []*castv1.Message{{ClientId: ids.NewClientID(), Kind: kind, Agent: "claude", Text: text}}}); err != nil {
			t.Fatal(err)
		}
	}
	add(castv1.MessageKind_MESSAGE_KIND_USER, "WEB-MARK-0")
	login, err := c.Auth.CreateWebLogin(ctx, &castv1.CreateWebLoginRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// The browser reaches the app through a proxy that can drop its
	// connections (its cookie is named for the port it asks, the proxy's).
	proxy := testharness.StartProxy(t, webAddr)
	link := strings.Replace(login.Url, webAddr, proxy.Addr, 1)
	shots := t.TempDir() // CAST_WEB_SHOTS=DIR keeps them after the test
	if d := os.Getenv("CAST_WEB_SHOTS"); d != "" {
		shots = d
	}
	page := testharness.StartProcEnv(t, []string{"CAST_WEB_LOGIN=" + link, "CAST_WEB_SESSION=" + sess.Id, "CAST_WEB_SHOTS=" + shots,
		"CHROMIUM=" + chromium, "CAST_WEB_PROFILE=" + t.TempDir()}, "node", filepath.Join(app, "e2e", "resume.mjs"))
	await := func(line string) {
		t.Helper()
		if err := page.AwaitLine("step: "+line, "the page ("+line+")", 3*time.Minute); err != nil {
			t.Fatal(err)
		}
	}

	await("the timeline is open")
	add(castv1.MessageKind_MESSAGE_KIND_ASSISTANT, "WEB-MARK-1")
	await("WEB-MARK-1 arrived live")
	srv.Stop()
	testharness.StartControlPlane(t, cfg)
	testharness.WaitFor(t, time.Minute, "the test's client back on the restarted control plane", func() bool {
		_, err := c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{SessionId: sess.Id})
		return err == nil
	})
	add(castv1.MessageKind_MESSAGE_KIND_ASSISTANT, "WEB-MARK-2")
	await("WEB-MARK-2 arrived after the restart")
	proxy.Reset()
	add(castv1.MessageKind_MESSAGE_KIND_ASSISTANT, "WEB-MARK-3")
	code, exited := page.Wait(3 * time.Minute)
	t.Logf("resume.mjs:\n%s", page.Output())
	if !exited || code != 0 {
		t.Fatalf("the browser run failed (exited %v, code %d); screenshots in %s", exited, code, shots)
	}
	// Every stored message drawn, in order (the script checked each is
	// drawn once).
	stored, err := c.Sessions.ListMessages(ctx, &castv1.ListMessagesRequest{SessionId: sess.Id})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, m := range stored.Messages {
		want = append(want, strconv.FormatInt(m.Seq, 10))
	}
	if line := "drawn: " + strings.Join(want, ","); !strings.Contains(page.Output(), line+"\n") {
		t.Fatalf("the page did not draw the stored messages (%s) once each, in order", line)
	}
}

// bigSession imports an n-message conversation (history: nothing runs)
// and prints what opening it costs the server: the session and its newest
// page, as the timeline reads them (a figure, not a limit).
func bigSession(t *testing.T, r *turnRig, n int) string {
	t.Helper()
	ctx := context.Background()
	sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), Title: "ten thousand", HistoryMessages: int64(n)})
	if err != nil {
		t.Fatal(err)
	}
	msgs := benchConversation(n)
	// It ends with thinking and a screenshot the user attached, which the
	// page folds and shows.
	msgs[n-2] = transcript.Message{Kind: transcript.KindThinking, Text: "WEB-THINKING: weigh the two files"}
	msgs[n-1] = transcript.Message{Kind: transcript.KindUser, Text: "WEB-IMAGE: see the screenshot",
		Images: []transcript.Image{{MediaType: "image/png", Data: onePixelPNG(t)}}}
	for i := 0; i < len(msgs); i += 500 {
		var batch []*castv1.Message
		for _, m := range msgs[i:min(i+500, len(msgs))] {
			m.ClientID = ids.NewClientID()
			batch = append(batch, wire.ToProto(m))
		}
		if _, err := r.c.Sessions.AppendMessages(ctx, &castv1.AppendMessagesRequest{SessionId: sess.Id, Messages: batch}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	got, err := r.c.Sessions.GetSession(ctx, &castv1.GetSessionRequest{SessionId: sess.Id})
	if err != nil {
		t.Fatal(err)
	}
	page, err := r.c.Sessions.ListMessages(ctx, &castv1.ListMessagesRequest{SessionId: sess.Id, StartSeq: got.LastSeq - 199, EndSeq: got.LastSeq, PageSize: 200})
	if err != nil || len(page.Messages) != 200 {
		t.Fatalf("the newest page of %d: %d messages, %v", n, len(page.Messages), err)
	}
	t.Logf("figure: opening a %d-message session (the session and its newest 200 messages) took %s of server time", n, time.Since(start))
	return sess.Id
}

// onePixelPNG is a valid 1x1 PNG.
func onePixelPNG(t *testing.T) []byte {
	var b bytes.Buffer
	img := image.NewRGBA(image.Rect(0, 0, 1, 1))
	img.Set(0, 0, color.RGBA{R: 200, A: 255})
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// The timeline reads a session across a compaction of the store (hourly,
// or NOSPACE recovery): pages of a few messages, and the page's second
// ListMessages held (internal/web/app/e2e/expired.mjs) until the store is
// compacted past its page token's revision. The server refuses that page
// as an expired token (INVALID_PAGE_TOKEN, in the error's ErrorInfo), and
// the page reads the rest again from after the last message it has: every
// stored message drawn once, in order, and no error said.
func TestWebTimelineRestartsAnExpiredListing(t *testing.T) {
	t.Parallel()
	ep := testharness.StartEtcd(t, nil)
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) {
		c.EtcdEndpoints, c.DataDir = []string{ep}, ""
		c.Web.Listen, c.Web.Plain = "127.0.0.1:0", true // as --dev
		// About three of the messages below a page (a page holds at least
		// a chunk).
		c.Store.ChunkBytes, c.Store.PageBytes = 2<<10, 4<<10
	})
	c := testharness.Dial(t, srv.Addr())
	ctx := context.Background()
	testharness.StartNode(t, srv.Addr(), "n1", nil)
	testharness.WaitFor(t, 30*time.Second, "node n1 connected", func() bool { return testharness.NodeConnectedSince(c, "n1", time.Time{}) })
	const n = 30
	// An import: nothing runs, so the session holds only these.
	sess, err := c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Node: "n1", Cwd: t.TempDir(), HistoryMessages: n})
	if err != nil {
		t.Fatal(err)
	}
	var batch []*castv1.Message
	for i := range n {
		batch = append(batch, &castv1.Message{ClientId: ids.NewClientID(), Kind: castv1.MessageKind_MESSAGE_KIND_USER,
			Text: fmt.Sprintf("WEB-ROW-%d %s", i+1, strings.Repeat("x", 1<<10))})
	}
	if _, err := c.Sessions.AppendMessages(ctx, &castv1.AppendMessagesRequest{SessionId: sess.Id, Messages: batch}); err != nil {
		t.Fatal(err)
	}
	drawn := expiredListing(t, ep, c, n, "CAST_WEB_LISTING=messages", "CAST_WEB_SESSION="+sess.Id)
	var want []string
	if err := c.EachMessage(ctx, 0, &castv1.ListMessagesRequest{SessionId: sess.Id}, func(m *castv1.Message) error {
		want = append(want, strconv.FormatInt(m.Seq, 10))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(want, ","); drawn != got {
		t.Fatalf("the page drew messages %s; want the stored %s once each, in order", drawn, got)
	}
}

// The inbox lists more sessions than its page (500) across a compaction
// of the store: the page's second ListSessions is held until the store is
// compacted past its token's revision, the server refuses it as expired,
// and the inbox lists again from the start (a listing is one snapshot):
// every session shown once, and no error said.
func TestWebInboxRestartsAnExpiredListing(t *testing.T) {
	t.Parallel()
	ep := testharness.StartEtcd(t, nil)
	st := testharness.OpenStore(t, ep, nil)
	if _, err := st.RegisterNode(context.Background(), &castv1.Node{Name: "n1"}, "test", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	const n = 501
	want := testharness.Sessions(t, st, "n1", n)
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) {
		c.EtcdEndpoints, c.DataDir = []string{ep}, ""
		c.Web.Listen, c.Web.Plain = "127.0.0.1:0", true // as --dev
	})
	drawn := expiredListing(t, ep, testharness.Dial(t, srv.Addr()), n, "CAST_WEB_LISTING=sessions")
	if got := strings.Join(want, ","); drawn != got {
		t.Fatalf("the inbox showed sessions %s; want each of %s once", drawn, got)
	}
}

// expiredListing runs internal/web/app/e2e/expired.mjs (env: the listing
// and its rows) signed in as the admin of the control plane c reaches,
// over the etcd at ep, which it compacts while the script holds the
// listing's second page; it returns the rows the page drew.
func expiredListing(t *testing.T, ep string, c *client.Client, rows int, env ...string) string {
	t.Helper()
	app := browserApp(t)
	ctx := context.Background()
	login, err := c.Auth.CreateWebLogin(ctx, &castv1.CreateWebLoginRequest{})
	if err != nil {
		t.Fatal(err)
	}
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	shots := t.TempDir() // CAST_WEB_SHOTS=DIR keeps them after the test
	if d := os.Getenv("CAST_WEB_SHOTS"); d != "" {
		shots = d
	}
	release := filepath.Join(t.TempDir(), "compacted")
	page := testharness.StartProcEnv(t, append([]string{"CAST_WEB_LOGIN=" + login.Url, "CAST_WEB_COUNT=" + strconv.Itoa(rows),
		"CAST_WEB_RELEASE=" + release, "CAST_WEB_SHOTS=" + shots, "CHROMIUM=" + chromium, "CAST_WEB_PROFILE=" + t.TempDir()}, env...),
		"node", filepath.Join(app, "e2e", "expired.mjs"))
	if err := page.AwaitLine("step: a page token held", "the listing's second page", 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	// A write first: compacting at the listing's own revision would keep
	// it readable.
	put, err := etcd.Put(ctx, "compact-marker", "x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := etcd.Compact(ctx, put.Header.Revision); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	code, exited := page.Wait(3 * time.Minute)
	t.Logf("expired.mjs:\n%s", page.Output())
	if !exited || code != 0 {
		t.Fatalf("the browser run failed (exited %v, code %d); screenshots in %s", exited, code, shots)
	}
	_, drawn, ok := strings.Cut(page.Output(), "drawn: ")
	if !ok {
		t.Fatal("the page printed no rows drawn")
	}
	drawn, _, _ = strings.Cut(drawn, "\n")
	return drawn
}

// A sign-out the control plane refused (its store failed: 503) leaves the
// browser signed in; the page says so rather than "Signed out."
// (internal/web/app/e2e/signout.mjs), and one that went through signs the
// browser out of the API.
func TestWebSignOutSaysWhenItFailed(t *testing.T) {
	t.Parallel()
	app := browserApp(t)
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) {
		c.Web.Listen, c.Web.Plain = "127.0.0.1:0", true // as --dev
	})
	login, err := testharness.DialServer(t, srv).Auth.CreateWebLogin(context.Background(), &castv1.CreateWebLoginRequest{})
	if err != nil {
		t.Fatal(err)
	}
	shots := t.TempDir() // CAST_WEB_SHOTS=DIR keeps them after the test
	if d := os.Getenv("CAST_WEB_SHOTS"); d != "" {
		shots = d
	}
	page := testharness.StartProcEnv(t, []string{"CAST_WEB_LOGIN=" + login.Url, "CAST_WEB_SHOTS=" + shots,
		"CHROMIUM=" + chromium, "CAST_WEB_PROFILE=" + t.TempDir()}, "node", filepath.Join(app, "e2e", "signout.mjs"))
	code, exited := page.Wait(3 * time.Minute)
	t.Logf("signout.mjs:\n%s", page.Output())
	if !exited || code != 0 {
		t.Fatalf("the browser run failed (exited %v, code %d); screenshots in %s", exited, code, shots)
	}
}
