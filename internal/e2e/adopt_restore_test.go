package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
	"github.com/cast-dev/cast/internal/transcript"
)

// The archive of native sessions, restored with the agents' own CLIs.
//
// It holds while the node is down. A session adopted from the agent's own
// folder is resumed by hand while its node is down: the turn it adds is
// adopted when the node is back. The node goes down again and the user
// deletes the whole folder the file was in; the node starts without it
// and the cast session still holds every message; `cast restore` writes
// it back, and the agent's own resume sends the model every turn once, in
// order. Once more, restored while the node is down (the node's
// bookkeeping of that path is of the file before): the node starts, takes
// the restored file as the session's, and what the next resume adds is
// kept once, after the rest.
//
// A session holding a compaction summary and, after it, a user message
// with an image is restored from the summary on: the resume sends the
// summary, the image and the messages after it once each, and nothing the
// summary stands for. The same session switched to another agent since is
// restored as that agent's new session, which resumes so too, and what
// that resume adds goes to the same cast session.
//
// A session restored while the node is down is not restored a second
// time while that copy is there (Codex: each restore a new native id, so
// every restore left another copy, and the node, started after, adopted
// all but the newest as new sessions holding copies); the node follows the
// one copy as the session.
func TestRestoreFromTheArchive(t *testing.T) {
	t.Parallel()
	names := []string{"claude", "codex"}
	r := newAdoptRig(t, names...)
	for _, agent := range names {
		t.Run("node-down/"+agent, func(t *testing.T) {
			defer r.use(t)()
			r.restoreAcrossNodeDowntime(agent)
		})
	}
	t.Run("restored-twice-while-down/codex", func(t *testing.T) {
		defer r.use(t)()
		r.restoreTwiceWhileDown("codex")
	})
	t.Run("cast-turns-around/claude", func(t *testing.T) {
		defer r.use(t)()
		r.restoreBetweenCastTurns("claude")
	})
	for _, to := range names {
		t.Run("image-and-summary/claude-to-"+to, func(t *testing.T) {
			defer r.use(t)()
			r.restoreImageAndSummary("claude", to)
		})
	}
}

func (r *adoptRig) restoreAcrossNodeDowntime(agent string) {
	t := r.t.(*testing.T)
	mark := func(n int) string { return fmt.Sprintf("DOWN-%s-%d", strings.ToUpper(agent), n) }
	cwd := agenttest.Cwd(t, r.homes[agent], "proj-down-"+agent)
	r.direct(agent, cwd, dmsg(mark(1)), agents.FormFresh, nil)
	sess := r.adoptedIn(agent, cwd)
	o := sess.Origin
	r.waitHolds(sess.Id, agent, o.Path)

	// Resumed by hand while the node is down: adopted once it is back.
	r.node.Kill()
	r.direct(agent, cwd, dmsg(mark(2)), agents.FormResume, map[string]string{"id": o.NativeId, "path": o.Path})
	r.restartNode()
	held := r.waitHolds(sess.Id, agent, o.Path)

	// The whole folder deleted while the node is down.
	r.node.Kill()
	if err := os.RemoveAll(filepath.Dir(o.Path)); err != nil {
		t.Fatal(err)
	}
	r.restartNode()
	restored := r.restore(sess.Id, agent)
	r.waitFollowsRestored(restored.Path, sess.Id)
	r.assertHolds(sess.Id, held)
	r.fake.Reset()
	r.direct(agent, cwd, dmsg(mark(3)), agents.FormResume, map[string]string{"id": restored.NativeID, "path": restored.Path})
	assertResumedOnce(t, r.fake, mark(1), mark(2), mark(3))
	held = r.waitHolds(sess.Id, agent, restored.Path)

	// Deleted and restored while the node is down.
	r.node.Kill()
	if err := os.Remove(restored.Path); err != nil {
		t.Fatal(err)
	}
	restored = r.restore(sess.Id, agent)
	r.restartNode()
	r.waitFollowsRestored(restored.Path, sess.Id)
	r.assertHolds(sess.Id, held)
	r.fake.Reset()
	r.direct(agent, cwd, dmsg(mark(4)), agents.FormResume, map[string]string{"id": restored.NativeID, "path": restored.Path})
	assertResumedOnce(t, r.fake, mark(1), mark(2), mark(3), mark(4))
	r.waitHolds(sess.Id, agent, restored.Path)
	if again := r.adoptedIn(agent, cwd); again.Id != sess.Id {
		t.Fatalf("the restored file was adopted again as %s", again.Id)
	}
}

// restoreTwiceWhileDown restores a session while the node is down, and
// again: refused while the first copy holds the conversation (Codex writes
// each restore under a new native id, so the check for the origin's id
// never saw it). The node, started after, follows the copy as the session,
// and what a resume by hand of it adds goes to that session.
func (r *adoptRig) restoreTwiceWhileDown(agent string) {
	t := r.t.(*testing.T)
	mark := func(n int) string { return fmt.Sprintf("TWICE-%s-%d", strings.ToUpper(agent), n) }
	cwd := agenttest.Cwd(t, r.homes[agent], "proj-twice-"+agent)
	r.direct(agent, cwd, dmsg(mark(1)), agents.FormFresh, nil)
	sess := r.adoptedIn(agent, cwd)
	held := r.waitHolds(sess.Id, agent, sess.Origin.Path)

	r.node.Kill()
	if err := os.Remove(sess.Origin.Path); err != nil {
		t.Fatal(err)
	}
	first := r.restore(sess.Id, agent)
	_, errOut, code := r.castEnv([]string{"XDG_CONFIG_HOME=" + r.config}, "restore", sess.Id, "--home", agenttest.NativeHome(r.homes[agent], agent), "--json")
	if code == 0 || !strings.Contains(errOut, first.NativeID) {
		t.Fatalf("a second restore while the first copy (%s) is there: exit %d, stderr %q; want it refused naming that copy", first.NativeID, code, errOut)
	}
	r.restartNode()
	r.waitFollowsRestored(first.Path, sess.Id)
	r.assertHolds(sess.Id, held)
	r.fake.Reset()
	r.direct(agent, cwd, dmsg(mark(2)), agents.FormResume, map[string]string{"id": first.NativeID, "path": first.Path})
	assertResumedOnce(t, r.fake, mark(1), mark(2))
	r.waitHolds(sess.Id, agent, first.Path)
	if again := r.adoptedIn(agent, cwd); again.Id != sess.Id {
		t.Fatalf("the restored file was adopted as %s, a copy of %s", again.Id, sess.Id)
	}
}

// restoreBetweenCastTurns has cast run a turn of an adopted session (its
// own native session, not the user's file), then the user's file is
// deleted, restored (with cast's turn in it) and resumed by hand; cast's
// next turn, resuming its own native session, gets what the hand-run
// turn added, once, after the rest.
func (r *adoptRig) restoreBetweenCastTurns(agent string) {
	t := r.t.(*testing.T)
	mark := func(n int) string { return fmt.Sprintf("AROUND-%s-%d", strings.ToUpper(agent), n) }
	cwd := agenttest.Cwd(t, r.homes[agent], "proj-around-"+agent)
	r.direct(agent, cwd, dmsg(mark(1)), agents.FormFresh, nil)
	sess := r.adoptedIn(agent, cwd)
	r.waitHolds(sess.Id, agent, sess.Origin.Path)
	seq := r.send(sess.Id, dmsg(mark(2)))
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)

	if err := os.Remove(sess.Origin.Path); err != nil {
		t.Fatal(err)
	}
	restored := r.restore(sess.Id, agent)
	r.waitFollowsRestored(restored.Path, sess.Id)
	r.fake.Reset()
	r.direct(agent, cwd, dmsg(mark(3)), agents.FormResume, map[string]string{"id": restored.NativeID, "path": restored.Path})
	assertResumedOnce(t, r.fake, mark(1), mark(2), mark(3))
	testharness.WaitFor(t, time.Minute, mark(3)+" and its answer adopted", func() bool {
		msgs := r.messages(sess.Id)
		i := slices.IndexFunc(msgs, func(m *castv1.Message) bool { return strings.Contains(m.Text, mark(3)) })
		return i >= 0 && msgs[len(msgs)-1].Kind == castv1.MessageKind_MESSAGE_KIND_ASSISTANT && len(msgs)-1 > i
	})
	r.fake.Reset()
	seq = r.send(sess.Id, dmsg(mark(4)))
	r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	assertResumedOnce(t, r.fake, mark(1), mark(2), mark(3), mark(4))
}

// restoreImageAndSummary adopts (through the node's own call) a session
// of agent from holding a compaction summary, then a user message with an
// image, switches it to agent to when that is another, restores it, and
// resumes it by hand.
func (r *adoptRig) restoreImageAndSummary(from, to string) {
	t := r.t.(*testing.T)
	mark := func(n int) string { return fmt.Sprintf("ARCH-%s-%s-%d", strings.ToUpper(from), strings.ToUpper(to), n) }
	cwd := agenttest.Cwd(t, r.homes[to], "proj-img-"+from+"-"+to)
	native := uuid.NewString()
	pic := testPNG(t)
	user := castv1.MessageKind_MESSAGE_KIND_USER
	answer := castv1.MessageKind_MESSAGE_KIND_ASSISTANT
	rows := []*castv1.Message{
		{Kind: user, Text: mark(1) + " before the summary"},
		{Kind: answer, Text: "an answer the summary stands for"},
		{Kind: castv1.MessageKind_MESSAGE_KIND_NOTICE, NoticeType: transcript.NoticeCompactionSummary, Text: mark(2) + " the summary of the start"},
		{Kind: user, Text: mark(3) + " look at this", Images: []*castv1.Image{{MediaType: "image/png", Data: pic}}},
		{Kind: answer, Text: "FAKE-ANSWER #0: saw it; last user said: " + mark(3)},
	}
	start := time.Now().Add(-time.Hour)
	for i, m := range rows {
		m.ClientId = fmt.Sprintf("adopt.%s.%d", native, i)
		m.Agent = from
		m.CreateTime = timestamppb.New(start.Add(time.Duration(i) * time.Second))
	}
	resp, err := r.c.Nodes.AdoptSession(t.Context(), &castv1.AdoptSessionRequest{
		Node: "worker", Cwd: cwd, Title: "archived with an image", HistoryMessages: int64(len(rows)), Messages: rows,
		Origin: &castv1.SessionOrigin{Node: "worker", Agent: from, NativeId: native,
			Path: filepath.Join(agenttest.NativeHome(r.homes[from], from), "gone", native+".jsonl")},
	})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.SessionId
	held := r.messages(id)
	if to != from {
		r.switchTo(id, to)
	}
	restored := r.restore(id, to)
	if to != from && restored.NativeID == native {
		t.Fatalf("restored as %s session %s, the %s origin's id", to, restored.NativeID, from)
	}
	r.waitFollowsRestored(restored.Path, id)
	r.fake.Reset()
	r.direct(to, cwd, dmsg(mark(4)), agents.FormResume, map[string]string{"id": restored.NativeID, "path": restored.Path})
	turns := r.fake.Turns()
	if len(turns) != 1 {
		t.Fatalf("the resume made %d model turns, want 1", len(turns))
	}
	req := turns[0]
	assertHeldOnce(t, req, mark(2), mark(3), mark(4))
	if all := heldText(req); strings.Contains(all, mark(1)) {
		t.Fatalf("the resume sent what the summary stands for (%s):\n%s", mark(1), clipItems(all))
	}
	want := fakemodel.ImageText("image/png", pic)
	images := 0
	for _, it := range req.Items {
		if it.Kind == fakemodel.KindImage {
			if it.Text != want {
				t.Fatalf("the resume sent an image %s, want %s", it.Text, want)
			}
			images++
		}
	}
	if images != 1 {
		t.Fatalf("the resume sent the image %d times, want once:\n%s", images, clipItems(fmtItems(req.Items)))
	}

	// What the resume added goes to the same session, once, after the rest.
	testharness.WaitFor(t, time.Minute, mark(4)+" kept", func() bool {
		msgs := r.messages(id)
		return len(msgs) > len(held) && msgs[len(msgs)-1].Kind == answer
	})
	var added []string
	for _, m := range r.messages(id)[len(held):] {
		if m.Kind != castv1.MessageKind_MESSAGE_KIND_NOTICE {
			added = append(added, storedRow(m))
		}
	}
	if len(added) != 2 || !strings.Contains(added[0], mark(4)) {
		t.Fatalf("after the restore the session got\n  %s\nwant the prompt %s and its answer", strings.Join(added, "\n  "), mark(4))
	}
}

// testPNG is a small PNG image.
func testPNG(t *testing.T) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for x := range 8 {
		for y := range 8 {
			img.Set(x, y, color.RGBA{R: uint8(x * 30), G: 120, B: uint8(y * 30), A: 255})
		}
	}
	var b bytes.Buffer
	must(t, png.Encode(&b, img))
	return b.Bytes()
}

// adoptedIn is the one session adopted from agent's folder that ran in
// cwd, once there.
func (r *adoptRig) adoptedIn(agent, cwd string) *castv1.Session {
	r.t.Helper()
	var in []*castv1.Session
	testharness.WaitFor(r.t, time.Minute, "the "+agent+" session in "+cwd+" adopted", func() bool {
		resp, err := r.c.Sessions.ListSessions(r.t.Context(), &castv1.ListSessionsRequest{Filter: `origin = "native" AND agent = "` + agent + `"`})
		in = slices.DeleteFunc(resp.GetSessions(), func(s *castv1.Session) bool { return s.Cwd != cwd })
		return err == nil && len(in) > 0
	})
	if len(in) != 1 {
		r.t.Fatalf("%d sessions adopted from %s's folder ran in %s, want 1", len(in), agent, cwd)
	}
	return in[0]
}

// restartNode starts the rig's node again (after a Kill) with the user's
// config folder it shares with the CLI. The process is the rig's test's,
// not the subtest's (r.t), whose end would kill it before the next one.
func (r *adoptRig) restartNode() {
	r.t.Helper()
	r.startNodeOwned(r.root, "XDG_CONFIG_HOME="+r.config)
}

// restored is what `cast restore --json` wrote.
type restored struct {
	NativeID string `json:"native_id"`
	Path     string `json:"path"`
}

// restore runs `cast restore` of session id into agent's folder.
func (r *adoptRig) restore(id, agent string) restored {
	r.t.Helper()
	out, errOut, code := r.castEnv([]string{"XDG_CONFIG_HOME=" + r.config}, "restore", id, "--home", agenttest.NativeHome(r.homes[agent], agent), "--json")
	var got restored
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || got.Path == "" {
		r.t.Fatalf("cast restore: exit %d, out %q, err %q", code, out, errOut)
	}
	return got
}

// waitFollowsRestored waits until the running node took the file at path
// as the one `cast restore` wrote for session id: its next scans have
// seen it, and what it holds is that session's already.
func (r *adoptRig) waitFollowsRestored(path, id string) {
	r.t.Helper()
	p, _ := json.Marshal(path)
	want := []string{"native session written by cast", `"path":` + string(p), `"session":"` + id + `"`}
	testharness.WaitFor(r.t, time.Minute, "the node follows the restored "+path, func() bool {
		return slices.ContainsFunc(strings.Split(r.node.Output(), "\n"), func(l string) bool {
			for _, w := range want {
				if !strings.Contains(l, w) {
					return false
				}
			}
			return true
		})
	})
}

// assertHolds fails unless session id holds exactly the rows held (as
// storedRow shows them), in that order.
func (r *adoptRig) assertHolds(id string, held []*castv1.Message) {
	r.t.Helper()
	var want, got []string
	for _, m := range held {
		want = append(want, storedRow(m))
	}
	for _, m := range r.messages(id) {
		got = append(got, storedRow(m))
	}
	if !slices.Equal(got, want) {
		r.t.Fatalf("session %s holds\n  %s\nwant what it held\n  %s", id, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// assertResumedOnce checks the one model turn a resume made (the fake
// reset before it), its prompts each dmsg(mark): the user's marks each
// once, in order, and one answer for each turn before (the fake's answers
// quote no mark: dmsg puts it past what they quote).
func assertResumedOnce(t *testing.T, fake *fakemodel.Server, marks ...string) {
	t.Helper()
	turns := fake.Turns()
	if len(turns) != 1 {
		t.Fatalf("the resume made %d model turns, want 1", len(turns))
	}
	req := turns[0]
	assertDeliveredOnce(t, req, marks...)
	answers := 0
	for _, it := range req.Items {
		if it.Kind == fakemodel.KindText && it.Role != "system" {
			answers += strings.Count(it.Text, "FAKE-ANSWER #")
		}
	}
	if answers != len(marks)-1 {
		t.Fatalf("%s request holds %d answers, want %d:\n%s", req.API, answers, len(marks)-1, clipItems(fmtItems(req.Items)))
	}
}
