package e2e

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/fakemodel"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/testharness"
)

// The delivery rule at seams the scenario tests do not combine, with the
// cheap CLIs (claude, codex, pi; gemini once), mostly one or two turns per
// agent: messages queued behind a turn a switch stops, an interrupt
// followed at once by a message and a switch, `cast exec --resume` right
// after a switch, a fork at an earlier seq merged into a parent that
// switched, a fork of a running session, images (an imported user
// attachment, pi's and codex's own tool results) across switches, a
// switch made while the node is down, a kill -9 after a switch with a
// message queued, the new agent's first (catch-up) turn interrupted, and
// a parked or held prompt followed by a switch. Besides each subtest's own
// checks, every model request a subtest caused holds each of its marks at
// most once.
func TestDeliveryAtSeams(t *testing.T) {
	t.Parallel()
	r := newTurnRig(t, "claude", "codex", "pi", "gemini")
	ctx := context.Background()
	run := func(name string, f func(t *testing.T, m func(int) string)) {
		t.Run(name, func(t *testing.T) {
			before := len(r.fake.Turns())
			f(t, func(n int) string { return fmt.Sprintf("SEAM-%s-%d.", name, n) })
			// Every request of this probe holds each of its marks at most once.
			re := regexp.MustCompile(regexp.QuoteMeta("SEAM-"+name+"-") + `[0-9]+\.`)
			for i, req := range r.fake.Turns()[before:] {
				var user strings.Builder
				for _, it := range req.Items {
					if it.Role == "user" && it.Kind == fakemodel.KindText {
						user.WriteString(it.Text + "\n")
					}
				}
				seen := map[string]int{}
				for _, mk := range re.FindAllString(user.String(), -1) {
					seen[mk]++
				}
				for mk, n := range seen {
					if n != 1 {
						t.Errorf("request %d (%s) of the probe holds %s %d times:\n%s", i, req.API, mk, n, clipItems(user.String()))
					}
				}
			}
		})
	}

	// Two messages queued behind a running turn, then a switch before the
	// first queued one runs.
	run("queued", func(t *testing.T, m func(int) string) {
		id := r.create("claude", dmsg(m(1)))
		seq, release := r.sendHeld(id, dmsg(m(2)))
		r.send(id, dmsg(m(3)))
		s4 := r.send(id, dmsg(m(4)))
		r.switchTo(id, "codex")
		r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, seq)
		release()
		// The queued messages run on the new agent without another message.
		r.waitDelivered(id, "the queued messages answered", s4)
		assertDeliveredOnce(t, requestWith(t, r.fake, m(4)), m(1), m(2), m(3), m(4))
		s5 := r.send(id, dmsg(m(5)))
		r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, s5)
		assertDeliveredOnce(t, requestWith(t, r.fake, m(5)), m(1), m(2), m(3), m(4), m(5))
	})

	// Interrupt, then at once another message and a switch.
	run("intsend", func(t *testing.T, m func(int) string) {
		id := r.create("claude", dmsg(m(1)))
		seq, release := r.sendHeld(id, dmsg(m(2)))
		r.interrupt(id, seq)
		release()
		s3 := r.send(id, dmsg(m(3)))
		r.switchTo(id, "pi")
		r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, s3)
		// m4 may come as pi's first turn (m3's) is starting: that turn
		// runs what the node had received, m4 the next, and the session
		// is idle past s4 between the two (a fresh-clone run's load), so
		// wait for m4's delivery, not for idle.
		s4 := r.send(id, dmsg(m(4)))
		r.waitDelivered(id, "m4 answered", s4)
		assertDeliveredOnce(t, requestWith(t, r.fake, m(4)), m(1), m(2), m(3), m(4))
	})

	// cast exec --resume right after a switch.
	run("exec", func(t *testing.T, m func(int) string) {
		id := r.create("claude", dmsg(m(1)))
		r.switchTo(id, "codex")
		out, errOut, code := r.cast("", "exec", "--resume", id, dmsg(m(2)))
		if code != 0 || !strings.Contains(out, "w00") {
			t.Fatalf("exec after switch: exit %d out %q err %q", code, out, errOut)
		}
		req := requestWith(t, r.fake, m(2))
		if req.API == fakemodel.Anthropic {
			t.Fatalf("exec after a switch to codex ran on claude")
		}
		assertDeliveredOnce(t, req, m(1), m(2))
		r.switchTo(id, "pi")
		out, errOut, code = r.cast("", "exec", "--resume", id, dmsg(m(3)))
		if code != 0 {
			t.Fatalf("exec after switch to pi: exit %d out %q err %q", code, out, errOut)
		}
		assertDeliveredOnce(t, requestWith(t, r.fake, m(3)), m(1), m(2), m(3))
	})

	// A fork at an earlier seq onto another agent, merged back into a
	// parent that switched meanwhile.
	run("forkmerge", func(t *testing.T, m func(int) string) {
		id := r.create("claude", dmsg(m(1)))
		at := r.messages(id)
		atSeq := at[len(at)-1].Seq
		s2 := r.send(id, dmsg(m(2)))
		r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, s2)
		fork, err := r.c.Sessions.ForkSession(ctx, &castv1.ForkSessionRequest{SessionId: id, AtSeq: atSeq, Agent: "pi", Model: "fake/fake-model"})
		must(t, err)
		f := r.send(fork.Id, dmsg(m(10)))
		r.waitState(fork.Id, castv1.SessionState_SESSION_STATE_IDLE, f)
		freq := requestWith(t, r.fake, m(10))
		assertDeliveredOnce(t, freq, m(1), m(10))
		if strings.Contains(fmt.Sprint(freq.Items), m(2)) {
			t.Fatalf("the fork at seq %d holds %s", atSeq, m(2))
		}
		r.switchTo(id, "codex")
		if _, err := r.c.Sessions.MergeSession(ctx, &castv1.MergeSessionRequest{ForkId: fork.Id}); err != nil {
			t.Fatal(err)
		}
		s3 := r.send(id, dmsg(m(3)))
		r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, s3)
		req := requestWith(t, r.fake, m(3))
		all := fmt.Sprint(req.Items)
		if n := strings.Count(all, m(10)); n != 1 {
			t.Fatalf("parent's request holds the fork's message %d times:\n%s", n, clipItems(fmtItems(req.Items)))
		}
		assertDeliveredOnce(t, req, m(1), m(2), m(3))
		// Back to claude: the merge and m3 once.
		r.switchTo(id, "claude")
		s4 := r.send(id, dmsg(m(4)))
		r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, s4)
		req = requestWith(t, r.fake, m(4))
		if n := strings.Count(fmt.Sprint(req.Items), m(10)); n != 1 {
			t.Fatalf("claude's request holds the fork's message %d times:\n%s", n, clipItems(fmtItems(req.Items)))
		}
		assertDeliveredOnce(t, req, m(1), m(2), m(3), m(4))
	})

	// A fork at the tip while the parent runs a turn.
	run("forkrunning", func(t *testing.T, m func(int) string) {
		id := r.create("claude", dmsg(m(1)))
		seq, release := r.sendHeld(id, dmsg(m(2)))
		fork, err := r.c.Sessions.ForkSession(ctx, &castv1.ForkSessionRequest{SessionId: id, Agent: "codex"})
		must(t, err)
		f := r.send(fork.Id, dmsg(m(10)))
		r.waitState(fork.Id, castv1.SessionState_SESSION_STATE_IDLE, f)
		assertDeliveredOnce(t, requestWith(t, r.fake, m(10)), m(1), m(2), m(10))
		release()
		r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, seq)
	})

	// A switched session forked natively onto the agent it left.
	run("switchfork", func(t *testing.T, m func(int) string) {
		id := r.create("claude", dmsg(m(1)))
		r.switchTo(id, "pi")
		s2 := r.send(id, dmsg(m(2)))
		r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, s2)
		for i, agent := range []string{"claude", "pi", "codex"} {
			fork, err := r.c.Sessions.ForkSession(ctx, &castv1.ForkSessionRequest{SessionId: id, Agent: agent})
			must(t, err)
			f := r.send(fork.Id, dmsg(m(10+i)))
			r.waitState(fork.Id, castv1.SessionState_SESSION_STATE_IDLE, f)
			assertDeliveredOnce(t, requestWith(t, r.fake, m(10+i)), m(1), m(2), m(10+i))
		}
	})

	// A turn interrupted after its tool ran, then a switch.
	run("inttool", func(t *testing.T, m func(int) string) {
		id := r.create("claude", dmsg(m(1)))
		gate := make(chan struct{})
		r.fake.Enqueue(fakemodel.Reply{Shell: "echo SEAM-TOOL-OUTPUT"}, fakemodel.Reply{Text: "held", Gate: gate})
		n := r.fake.TurnsStarted()
		seq := r.send(id, dmsg(m(2)))
		waitTurns(t, r.fake, n+2)
		r.interrupt(id, seq)
		close(gate)
		agents := []string{"codex", "pi", "claude"}
		r.eachHoldsAll(t, id, m, 3, agents...)
		for i, agent := range agents {
			req := requestWith(t, r.fake, m(3+i))
			c := 0 // lines of output, not the command that printed them
			for _, it := range req.Items {
				for _, line := range strings.Split(it.Text, "\n") {
					if strings.TrimSpace(line) == "SEAM-TOOL-OUTPUT" {
						c++
					}
				}
			}
			if c != 1 {
				t.Errorf("%s's request holds the interrupted turn's tool output %d times, want once:\n%s", agent, c, clipItems(fmtItems(req.Items)))
			}
		}
	})

	// An imported user message with an image, then each agent.
	run("importimage", func(t *testing.T, m func(int) string) {
		sess, err := r.c.Sessions.CreateSession(ctx, &castv1.CreateSessionRequest{Agent: "claude", Cwd: t.TempDir(), HistoryMessages: 2})
		must(t, err)
		png := seamPNG(t, 40)
		_, err = r.c.Sessions.AppendMessages(ctx, &castv1.AppendMessagesRequest{SessionId: sess.Id, Messages: []*castv1.Message{
			{ClientId: "h1", Kind: castv1.MessageKind_MESSAGE_KIND_USER, Text: dmsg(m(1)), Images: []*castv1.Image{{MediaType: "image/png", Data: png}}},
			{ClientId: "h2", Kind: castv1.MessageKind_MESSAGE_KIND_ASSISTANT, Text: "a picture"}}})
		must(t, err)
		r.eachHoldsAll(t, sess.Id, m, 2, "claude", "codex", "pi", "gemini", "claude", "codex")
		eachHoldsOneImage(t, r, m, 2, 6)
	})

	// A tool result image from pi's or codex's own tool, then the others.
	for _, c := range []struct{ agent, tool, arg string }{{"pi", "read", "path"}, {"codex", "view_image", "path"}} {
		run(c.agent+"image", func(t *testing.T, m func(int) string) {
			cwd := t.TempDir()
			shot := filepath.Join(cwd, "shot.png")
			must(t, os.WriteFile(shot, seamPNG(t, 70), 0o600))
			r.fake.Enqueue(fakemodel.Reply{Tool: &fakemodel.ToolCall{Name: c.tool, Input: map[string]any{c.arg: shot}}})
			create := &castv1.CreateSessionRequest{Agent: c.agent, Cwd: cwd, Text: dmsg(m(1))}
			if c.agent == "pi" {
				create.Model = "fake/fake-model"
			}
			sess, err := r.c.Sessions.CreateSession(ctx, create)
			must(t, err)
			r.waitState(sess.Id, castv1.SessionState_SESSION_STATE_IDLE, 1)
			if n := imageCount(r.fake.Turns()[len(r.fake.Turns())-1]); n != 1 {
				t.Fatalf("%s sent the model %d images after its own tool read the picture, want 1", c.agent, n)
			}
			var others []string
			for _, a := range []string{"claude", "codex", "pi", "claude"} {
				if a != c.agent {
					others = append(others, a)
				}
			}
			r.eachHoldsAll(t, sess.Id, m, 2, others...)
			eachHoldsOneImage(t, r, m, 2, len(others))
		})
	}

	// A switch and two messages while the node is down.
	run("nodedown", func(t *testing.T, m func(int) string) {
		id := r.create("claude", dmsg(m(1)))
		r.node.Kill()
		r.switchTo(id, "codex")
		r.send(id, dmsg(m(2)))
		s3 := r.send(id, dmsg(m(3)))
		r.startNode()
		r.waitDelivered(id, "m3 delivered", s3)
		assertDeliveredOnce(t, requestWith(t, r.fake, m(3)), m(1), m(2), m(3))
		s4 := r.send(id, dmsg(m(4)))
		r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, s4)
		assertDeliveredOnce(t, requestWith(t, r.fake, m(4)), m(1), m(2), m(3), m(4))
	})

	// kill -9 right after a switch that interrupted a turn with a message
	// queued behind it.
	run("killqueued", func(t *testing.T, m func(int) string) {
		id := r.create("claude", dmsg(m(1)))
		_, release := r.sendHeld(id, dmsg(m(2)))
		s3 := r.send(id, dmsg(m(3)))
		r.switchTo(id, "pi")
		r.node.Kill()
		release()
		r.startNode()
		r.waitDelivered(id, "m3 delivered", s3)
		s4 := r.send(id, dmsg(m(4)))
		r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, s4)
		assertDeliveredOnce(t, requestWith(t, r.fake, m(4)), m(1), m(2), m(3), m(4))
	})

	// The first turn after a switch (the one carrying the catch-up)
	// interrupted while the model holds it, then another message.
	for _, c := range [][2]string{{"claude", "pi"}, {"codex", "claude"}} {
		run("intcatchup-"+c[0]+"-"+c[1], func(t *testing.T, m func(int) string) {
			id := r.create(c[0], dmsg(m(1)))
			s2 := r.send(id, dmsg(m(2)))
			r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, s2)
			r.switchTo(id, c[1])
			seq, release := r.sendHeld(id, dmsg(m(3)))
			r.interrupt(id, seq)
			release()
			s4 := r.send(id, dmsg(m(4)))
			r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, s4)
			assertDeliveredOnce(t, requestWith(t, r.fake, m(4)), m(1), m(2), m(3), m(4))
			r.switchTo(id, c[0])
			s5 := r.send(id, dmsg(m(5)))
			r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, s5)
			assertDeliveredOnce(t, requestWith(t, r.fake, m(5)), m(1), m(2), m(3), m(4), m(5))
		})
	}

	// A turn that parked (429) or failed before reaching the model (401),
	// then a switch: the held prompt reaches the new agent once.
	for _, c := range []struct {
		name, to string
		status   int
		state    castv1.SessionState
	}{{"parked", "codex", 429, castv1.SessionState_SESSION_STATE_PARKED}, {"held", "pi", 401, castv1.SessionState_SESSION_STATE_FAILED}} {
		run(c.name+"-then-"+c.to, func(t *testing.T, m func(int) string) {
			id := r.create("claude", dmsg(m(1)))
			r.fake.FailNext(1, c.status)
			s2 := r.send(id, dmsg(m(2)))
			r.waitState(id, c.state, s2-1)
			r.switchTo(id, c.to)
			s3 := r.send(id, dmsg(m(3)))
			r.waitDelivered(id, "the held prompt and the next one answered", s3)
			assertDeliveredOnce(t, requestWith(t, r.fake, m(3)), m(1), m(2), m(3))
		})
	}

	// A merge with a message onto a parent that switched to pi.
	run("mergemsg", func(t *testing.T, m func(int) string) {
		id := r.create("claude", dmsg(m(1)))
		fork, err := r.c.Sessions.ForkSession(ctx, &castv1.ForkSessionRequest{SessionId: id, Agent: "codex"})
		must(t, err)
		f := r.send(fork.Id, dmsg(m(10)))
		r.waitState(fork.Id, castv1.SessionState_SESSION_STATE_IDLE, f)
		r.switchTo(id, "pi")
		resp, err := r.c.Sessions.MergeSession(ctx, &castv1.MergeSessionRequest{ForkId: fork.Id, Message: dmsg(m(2))})
		must(t, err)
		r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, resp.PromptSeq)
		req := requestWith(t, r.fake, m(2))
		if n := strings.Count(fmt.Sprint(req.Items), m(10)); n != 1 {
			t.Fatalf("pi's merge request holds the fork's message %d times:\n%s", n, clipItems(fmtItems(req.Items)))
		}
		assertDeliveredOnce(t, req, m(1), m(2))
		r.switchTo(id, "claude")
		s3 := r.send(id, dmsg(m(3)))
		r.waitState(id, castv1.SessionState_SESSION_STATE_IDLE, s3)
		req = requestWith(t, r.fake, m(3))
		if n := strings.Count(fmt.Sprint(req.Items), m(10)); n != 1 {
			t.Fatalf("claude's request holds the fork's message %d times:\n%s", n, clipItems(fmtItems(req.Items)))
		}
		assertDeliveredOnce(t, req, m(1), m(2), m(3))
	})
}

// waitTurns waits until the fake model has had n requests.
func waitTurns(t *testing.T, fake *fakemodel.Server, n int) {
	t.Helper()
	testharness.WaitFor(t, 2*time.Minute, "model requests", func() bool { return fake.TurnsStarted() >= n })
}

// seamPNG is an 8x8 PNG; shade tells pictures apart.
func seamPNG(t *testing.T, shade uint8) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	for x := range 8 {
		for y := range 8 {
			img.Set(x, y, color.RGBA{R: shade, G: uint8(x * 30), B: uint8(y * 30), A: 255})
		}
	}
	var b bytes.Buffer
	must(t, png.Encode(&b, img))
	return b.Bytes()
}

// eachHoldsOneImage checks that the requests that m(first) ..
// m(first+n-1) started hold one image each.
func eachHoldsOneImage(t *testing.T, r *turnRig, m func(int) string, first, n int) {
	t.Helper()
	for k := first; k < first+n; k++ {
		req := requestWith(t, r.fake, m(k))
		if got := imageCount(req); got != 1 {
			t.Errorf("the %s request started by %s holds %d images, want 1:\n%s", req.API, m(k), got, clipItems(fmtItems(req.Items)))
		}
	}
}

// imageCount is how many images req carries.
func imageCount(req fakemodel.Request) int {
	n := 0
	for _, it := range req.Items {
		if it.Kind == fakemodel.KindImage {
			n++
		}
	}
	return n
}
