package adopt_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/adopt"
	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/agents/opencode"
	"github.com/cast-dev/cast/internal/fakemodel"
	"github.com/cast-dev/cast/internal/transcript"
)

// storeAgent keeps its sessions as rows of its own database.
const storeAgent = "opencode"

// storeRig is one follower over a real OpenCode store whose listings it
// counts, failing one when told to (countingLister).
type storeRig struct {
	t     *testing.T
	home  string // the agent's own folder (XDG_DATA_HOME)
	cwd   string
	real  string
	env   []string
	lists *countingLister
	sink  *sink
	cast  castFiles
	f     *adopt.Follower
	clock time.Time
}

// countingLister is a store's own lister, counting its listings; failNext
// makes the next one fail.
type countingLister struct {
	agents.StoreLister
	n        int
	failNext bool
}

func (c *countingLister) StoredSessions(ctx context.Context, bin string, env []string, home string) ([]agents.StoredSession, error) {
	c.n++
	if c.failNext {
		c.failNext = false
		return nil, errors.New("listing failed as the test asked")
	}
	return c.StoreLister.StoredSessions(ctx, bin, env, home)
}

func newStoreRig(t *testing.T) *storeRig {
	real := agenttest.Bin(t, storeAgent)
	home, env := agenttest.Env(t, storeAgent, fakemodel.Start(t).URL)
	r := &storeRig{t: t, home: agenttest.NativeHome(home, storeAgent), cwd: agenttest.Cwd(t, home, "proj"), real: real, env: env,
		lists: &countingLister{}, sink: &sink{}, cast: castFiles{runs: map[string]bool{}, busy: map[string]bool{}, scratch: map[string]bool{}}, clock: time.Now()}
	f, err := adopt.New([]adopt.Source{{Agent: storeAgent, Home: r.home, Bin: real, Env: env}}, t.TempDir(), r.sink, r.cast, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	adopt.SetClock(f, func() time.Time { return r.clock })
	adopt.WrapStoreLister(f, func(sl agents.StoreLister) agents.StoreLister {
		r.lists.StoreLister = sl
		return r.lists
	})
	r.f = f
	return r
}

// write adds a session saying text to the store with the real CLI (not
// the wrapper), and ages the store.
func (r *storeRig) write(sessionID, text string) {
	r.t.Helper()
	w, err := agents.WriterFor(storeAgent, r.real, r.env)
	if err != nil {
		r.t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	msgs := []transcript.Message{
		{Seq: 1, Time: at, Kind: transcript.KindUser, Text: text},
		{Seq: 2, Time: at.Add(time.Second), Kind: transcript.KindAssistant, Text: text + " done"},
	}
	tg := agents.Target{Home: r.home, Cwd: r.cwd, SessionID: sessionID, Model: agenttest.FakeProvider + "/" + agenttest.FakeModel}
	if _, err := w.Write(tg, msgs); err != nil {
		r.t.Fatal(err)
	}
	r.age()
}

// storePath is the store's database file.
func (r *storeRig) storePath() string {
	a, _ := agents.Lookup(storeAgent)
	d, _ := a.Driver()
	return d.(agents.StoreDriver).StorePath(r.home)
}

// age ages the store's files (agenttest.Age).
func (r *storeRig) age() {
	agenttest.Age(r.t, filepath.Dir(r.storePath()))
}

// writing makes the store look written this moment, as while a turn
// streams its rows: its write-ahead log's mtime ahead of the clock, so
// its stamp cannot tell however long the scan takes to start.
func (r *storeRig) writing() {
	r.t.Helper()
	now := time.Now().Add(10 * time.Second)
	if err := os.Chtimes(r.storePath()+"-wal", now, now); err != nil {
		r.t.Fatal(err)
	}
}

// scan runs one Scan and returns how many listings it ran and the texts
// it sent; then it ages the store.
func (r *storeRig) scan() (listings int, sent []string, err error) {
	r.t.Helper()
	before, listed := len(r.sink.batches), r.lists.n
	_, err = r.f.Scan(context.Background())
	r.age()
	return r.lists.n - listed, r.sink.texts(before), err
}

// wantScan scans and checks how many listings it ran and what it sent.
func (r *storeRig) wantScan(step string, listings int, sent ...string) {
	r.t.Helper()
	n, got, err := r.scan()
	if err != nil {
		r.t.Fatalf("%s: %v", step, err)
	}
	if n != listings {
		r.t.Errorf("%s: %d listings, want %d", step, n, listings)
	}
	want(r.t, step, got, sent...)
}

// settles checks that the store, unchanged since a scan adopted a session,
// is not listed again: reading the session (StoreExport) did not write
// the store, as OpenCode's own `export` did (it updates its project's
// time), which cost a listing more.
func (r *storeRig) settles(step string) {
	r.t.Helper()
	r.wantScan(step+": nothing changed", 0)
	r.wantScan(step+": nothing changed again", 0)
}

// A store is listed again only when it changed: a scan of an unchanged
// store starts no CLI, the next one after a write lists and adopts what
// it added, and an unchanged store is listed again after five minutes.
// A store being written is listed at most every 15 s, then once it is
// still.
func TestFollowStoreListsOnlyWhenItChanged(t *testing.T) {
	r := newStoreRig(t)
	r.write("ses-stamp-a", "STAMP-A")
	r.wantScan("first scan", 1, "STAMP-A", "STAMP-A done")
	r.settles("adopted A")
	r.write("ses-stamp-b", "STAMP-B")
	r.writing()
	r.wantScan("being written, listed a moment ago", 0)
	r.wantScan("after a write, still", 1, "STAMP-B", "STAMP-B done")
	r.settles("adopted B")
	r.writing()
	r.wantScan("being written again", 0)
	r.clock = r.clock.Add(15 * time.Second)
	r.writing()
	r.wantScan("being written, 15 s on", 1)
	r.writing()
	r.wantScan("being written still", 0)
	r.wantScan("still again: a listing while written is not kept", 1)
	r.wantScan("then nothing changed", 0)
	r.clock = r.clock.Add(5 * time.Minute)
	r.wantScan("five minutes later", 1)
	r.wantScan("then nothing changed", 0)
}

// A stored session that ran in a scratch folder of cast's (a probe's that
// timed out before its CLI said the session's id) is never adopted, and
// leaves the store settled: not listed again at every scan.
func TestFollowStoreLeavesScratchRunsOut(t *testing.T) {
	r := newStoreRig(t)
	r.cast.scratch[r.cwd] = true
	r.write("ses-scratch", "PROBE")
	r.wantScan("a scratch run", 1)
	r.settles("left out")
}

// A scan that leaves a stored session to look at again (one waiting for
// cast's CLI to end, one the control plane refused, a listing that failed)
// does not mark the store as seen: the next scans list it until the
// session is adopted. The cases share one store, each with a session of
// its own (a fresh store a case would cost a few more runs of the CLI).
func TestFollowStoreListsAgainUntilNothingIsLeft(t *testing.T) {
	r := newStoreRig(t)
	for _, c := range []struct {
		name  string
		set   func(r *storeRig) // before the case's first scan
		clear func(r *storeRig) // after it
	}{
		{"busy", func(r *storeRig) { r.cast.busy[storeAgent] = true }, func(r *storeRig) { delete(r.cast.busy, storeAgent) }},
		{"refused", func(r *storeRig) { r.sink.fail = 1 }, func(*storeRig) {}},
		{"listing failed", func(r *storeRig) { r.lists.failNext = true }, func(*storeRig) {}},
	} {
		t.Run(c.name, func(t *testing.T) {
			text := "STAMP-" + strings.ReplaceAll(c.name, " ", "-")
			r.t = t
			r.write("ses-stamp-"+strings.ReplaceAll(c.name, " ", "-"), text)
			c.set(r)
			n, sent, _ := r.scan()
			if n != 1 || len(sent) != 0 {
				t.Fatalf("first scan: %d listings, sent %q; want 1 and nothing", n, sent)
			}
			c.clear(r)
			for i := 1; ; i++ {
				n, sent, _ := r.scan()
				if n != 1 {
					t.Fatalf("scan %d after the first: %d listings with the session not adopted, want 1", i, n)
				}
				if len(sent) > 0 {
					want(t, "adopted", sent, text, text+" done")
					break
				}
				if i == 3 {
					t.Fatal("not adopted after three more scans")
				}
			}
		})
	}
	r.t = t
	r.settles("every case adopted")
}

// OpenCode keeps a tool call as soon as the model begins it, pending with
// input {} while the model still streams the input, and then running with
// the input. A session listed in between keeps the call once, with its
// input: not a call of no input that never got a result beside the real
// one.
func TestFollowStoreKeepsAToolCallOnceItsInputIsKnown(t *testing.T) {
	r := newStoreRig(t)
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	input := `{"command":"ls"}`
	ex, err := opencode.Render(agents.Target{Home: r.home, Cwd: r.cwd}, []transcript.Message{
		{Seq: 1, Time: at, Kind: transcript.KindUser, Text: "list the files"},
		{Seq: 2, Time: at.Add(time.Second), Kind: transcript.KindToolCall, ToolCall: &transcript.ToolCall{ID: "call_1", Name: "bash", Input: input}},
	}, opencode.RenderOptions{Model: opencode.ModelRef{ProviderID: agenttest.FakeProvider, ModelID: agenttest.FakeModel}, Now: at})
	if err != nil {
		t.Fatal(err)
	}
	l := opencode.Loader{Bin: r.real, Env: r.env}
	tg := agents.Target{Home: r.home, Cwd: r.cwd}
	loaded := false
	load := func(st opencode.ToolState) {
		t.Helper()
		for i := range ex.Messages {
			for j := range ex.Messages[i].Parts {
				if p := &ex.Messages[i].Parts[j]; p.Type == "tool" {
					p.State = &st
				}
			}
		}
		var b bytes.Buffer
		if err := opencode.WriteExport(&b, ex); err != nil {
			t.Fatal(err)
		}
		// A pending state holds the input's raw text streamed so far.
		doc := bytes.Replace(b.Bytes(), []byte(`"status":"pending",`), []byte(`"status":"pending","raw":"",`), 1)
		file := filepath.Join(t.TempDir(), "export.json")
		if err := os.WriteFile(file, doc, 0o600); err != nil {
			t.Fatal(err)
		}
		if loaded { // import leaves a session it has alone
			if err := l.Delete(context.Background(), tg, ex.Info.ID); err != nil {
				t.Fatal(err)
			}
		}
		loaded = true
		if _, err := l.Import(context.Background(), tg, file); err != nil {
			t.Fatal(err)
		}
		r.age()
	}
	ms := at.Add(time.Second).UnixMilli()
	load(opencode.ToolState{Status: "pending", Input: json.RawMessage(`{}`), Time: &opencode.PartTime{Start: ms}})
	if _, sent, err := r.scan(); err != nil || len(sent) == 0 || sent[0] != "list the files" {
		t.Fatalf("the session listed while its call's input streams: sent %q, %v", sent, err)
	}
	load(opencode.ToolState{Status: "completed", Input: json.RawMessage(input), Output: "a.txt", Title: "ls",
		Metadata: json.RawMessage(`{"exit":0}`), Time: &opencode.PartTime{Start: ms, End: ms + 10}})
	if _, _, err := r.scan(); err != nil {
		t.Fatal(err)
	}
	var calls []string
	results := 0
	for _, b := range r.sink.batches {
		for _, m := range b.Messages {
			if m.ToolCall != nil {
				calls = append(calls, m.ToolCall.Input)
			}
			if m.ToolResult != nil {
				results++
			}
		}
	}
	if len(calls) != 1 || calls[0] != input || results != 1 {
		t.Fatalf("kept calls with inputs %q and %d results; want one call with %s and its result", calls, results, input)
	}
}
