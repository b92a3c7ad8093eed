package adopt_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/cast-dev/cast/internal/adopt"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/wire"
)

// limitSink refuses a batch holding a message the store would refuse for
// its size (its default limit, encoded), as AdoptSession does.
type limitSink struct{ sink }

func (s *limitSink) Adopt(ctx context.Context, b adopt.Batch) (string, error) {
	for _, m := range b.Messages {
		if n := proto.Size(wire.ToProto(m)); n > store.DefaultMaxMessageBytes {
			s.calls++
			return "", fmt.Errorf("message is %d bytes; the limit is %d", n, store.DefaultMaxMessageBytes)
		}
	}
	return s.sink.Adopt(ctx, b)
}

// userImages is a Claude user record with text and n PNG images of size
// bytes each (screenshots pasted into the prompt).
func userImages(uuid, parent, text string, n, size int) string {
	data := base64.StdEncoding.EncodeToString(make([]byte, size))
	blocks := []string{fmt.Sprintf(`{"type":"text","text":%q}`, text)}
	for range n {
		blocks = append(blocks, `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"`+data+`"}}`)
	}
	return fmt.Sprintf(`{"type":"user","uuid":%q,"parentUuid":%q,"sessionId":%q,"cwd":"/work/proj","timestamp":"2026-01-01T00:00:01Z","message":{"role":"user","content":[%s]}}`+"\n",
		uuid, parent, nativeID, strings.Join(blocks, ","))
}

// A native message larger than the store takes (screenshots pasted into
// one prompt) is kept in a form it takes, saying what was left out, and
// everything after it is adopted, once and in order, across restarts.
func TestFollowAdoptsPastAnOversizedMessage(t *testing.T) {
	r := newRig(t)
	ls := &limitSink{}
	r.sink = &ls.sink
	scan := func() []string {
		t.Helper()
		f, err := adopt.New([]adopt.Source{{Agent: r.agent, Home: r.home}}, r.state, ls, r.cast, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		before := len(ls.batches)
		if _, err := f.Scan(context.Background()); err != nil {
			t.Fatal(err)
		}
		return ls.texts(before)
	}
	r.write(line("user", "u1", "", "hello"),
		userImages("u2", "u1", "look at these", 3, 3<<20),
		line("assistant", "a3", "u2", "nice pictures"))
	got := scan()
	if len(got) != 3 || got[0] != "hello" || got[2] != "nice pictures" || !strings.HasPrefix(got[1], "look at these") ||
		!strings.Contains(got[1], "left out") {
		t.Fatalf("sent %q", got)
	}
	var kept int
	for _, b := range ls.batches {
		for _, m := range b.Messages {
			if strings.HasPrefix(m.Text, "look at these") {
				kept = len(m.Images)
			}
		}
	}
	if kept == 0 || kept == 3 {
		t.Fatalf("the oversized message kept %d of its 3 images, want those that fit", kept)
	}
	want(t, "restarted, unchanged", scan())
	r.append(line("user", "u4", "a3", "and now?"))
	want(t, "grown", scan(), "and now?")
}

// requestSink refuses a batch whose messages pass bound bytes encoded, as
// a control plane configured to take smaller requests than adoption's
// batches does (gRPC's RESOURCE_EXHAUSTED), and learns from it as the
// node's sink does: batches under half the refused one.
type requestSink struct {
	sink
	bound, learned int
}

func (s *requestSink) Adopt(ctx context.Context, b adopt.Batch) (string, error) {
	n := 0
	for _, m := range b.Messages {
		n += proto.Size(wire.ToProto(m))
	}
	if n > s.bound {
		s.calls++
		s.learned = n / 2
		return "", fmt.Errorf("grpc: received message larger than max (%d vs. %d)", n, s.bound)
	}
	return s.sink.Adopt(ctx, b)
}

func (s *requestSink) MaxBatchBytes() int { return s.learned }

// A session whose messages together passed what a control plane
// configured below adoption's 4 MiB batches takes was refused at every
// scan, and never adopted. The batch goes again in parts that pass, and
// every message is adopted once, in order.
func TestFollowAdoptsUnderASmallerRequestLimit(t *testing.T) {
	r := newRig(t)
	rs := &requestSink{bound: 1 << 20}
	r.sink = &rs.sink
	var lines []string
	var w []string
	parent := ""
	for i := range 10 {
		text := fmt.Sprintf("part %d %s", i, strings.Repeat("x", 300<<10))
		id := fmt.Sprint("u", i)
		lines = append(lines, line("user", id, parent, text))
		w, parent = append(w, text), id
	}
	r.write(lines...)
	f, err := adopt.New([]adopt.Source{{Agent: r.agent, Home: r.home}}, r.state, rs, r.cast, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	want(t, "scanned", rs.texts(0), w...)
}
