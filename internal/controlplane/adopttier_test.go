package controlplane_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/cli"
	"github.com/cast-dev/cast/internal/client"
	"github.com/cast-dev/cast/internal/controlplane"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/node"
	"github.com/cast-dev/cast/internal/objstore/s3test"
	"github.com/cast-dev/cast/internal/store"
	"github.com/cast-dev/cast/internal/testharness"
	"github.com/cast-dev/cast/internal/transcript"
)

// tierScaleEnv runs TestAdoptedHistoryBeyondEtcd at the scale:
// "1" a pi session of 100,000 messages, "gemini" a Gemini file of 400 MB
// (as TestTierKeepsEtcdFlat in internal/store runs at 100,000 appends).
const tierScaleEnv = "CAST_TIER_SCALE"

// adoptScale is one size of TestAdoptedHistoryBeyondEtcd.
type adoptScale struct {
	agent string
	quota int64 // etcd's
	total int   // messages in the native file
	size  int   // bytes of text a message
	steps int   // the file grows in this many appends, each adopted, then moved
	hot   int64 // the tiering's hot tail and least run
	segN  int   // messages a segment
	tenX  bool  // assert history >= 10x the quota
}

// bigAdoptScales are the scales by their CAST_TIER_SCALE value;
// any other non-empty value runs the 100,000-message pi session.
var bigAdoptScales = map[string]adoptScale{
	// A Gemini file of 410 MiB of text (20,000 messages of 21.5 KB), 10x a 40 MiB
	// quota; Gemini's file has no tail parser: every append is read
	// whole again, as the node does.
	"gemini": {agent: "gemini", quota: 40 << 20, total: 20000, size: 21500, steps: 40, hot: 200, segN: 1000, tenX: true},
	// 100,000 messages of 2.6 KB (248 MiB of text), 10x a 24 MiB quota
	// (the store's quota guard counts ~12 KB a message of this size:
	// a step of 1,000 needs 12 MB free).
	"1": {agent: "pi", quota: 24 << 20, total: 100000, size: 2600, steps: 100, hot: 500, segN: 2000, tenX: true},
}

func adoptScaleFor(t *testing.T) adoptScale {
	v := os.Getenv(tierScaleEnv)
	if v == "" {
		// 2.5x a 4 MiB quota in 640 messages of 16 KiB: a few seconds, under
		// -race too (etcd runs in this process, by the byte). A step is what
		// etcd takes between two moves (the store's quota guard counts
		// ~30 KiB a message).
		sc := adoptScale{agent: "pi", quota: 4 << 20, total: 640, size: 16 << 10, steps: 16, hot: 10, segN: 100}
		if testharness.RaceOn { // half: 1.25x the quota, the same steps (make test runs -race)
			sc.total, sc.steps = 320, 8
		}
		return sc
	}
	if sc, ok := bigAdoptScales[v]; ok {
		return sc
	}
	return bigAdoptScales["1"]
}

// TestAdoptedHistoryBeyondEtcd is issue 27's "a session of 100,000
// messages (and a 400 MB Gemini file) adopted, exported and rebuilt with
// etcd's size staying flat while total history grows 10x past etcd's
// quota", through the paths a user's machine runs: a native session file
// (written by the agent's own writer) grows in the home of a node that
// adopts it (internal/adopt, AdoptSession through the control plane's
// API); after each growth a replica moves history to a real S3 server
// process and etcd compacts; then the session is exported through the
// API and, its file deleted, rebuilt by `cast restore`, and both are
// checked message by message, in order. etcd's file stays under its
// quota and what it keeps beside the waiting messages stays flat (as in
// TestTierKeepsEtcdFlat). It logs the peak memory of the process (etcd,
// control plane, node and CLI in one).
func TestAdoptedHistoryBeyondEtcd(t *testing.T) {
	sc := adoptScaleFor(t)
	r := newAdoptTierRig(t, sc)
	msgs := conversation(sc)
	file := r.generate(msgs)
	testharness.ResetPeakRSS()

	start, lines := time.Now(), len(file.ends)-1
	var adopted, maxFile, midKept int64
	midAt, id := 0, ""
	for step := 1; step <= sc.steps; step++ {
		upto := sc.total * step / sc.steps
		adopted += r.grow(file, upto)
		id = r.waitAdopted(id, int64(upto))
		r.clock = r.clock.Add(2 * time.Hour)
		maxFile = max(maxFile, testharness.TierRound(t, r.mover, r.etcd, r.clock))
		if midAt == 0 && adopted >= sc.quota {
			midKept, midAt = testharness.KeptBesideMessages(t, r.etcd), upto
		}
	}
	t.Logf("peak memory adopting and moving: %s", testharness.PeakMemory())
	kept := testharness.KeptBesideMessages(t, r.etcd)
	_, inUse := testharness.EtcdSize(t, r.etcd)
	var text int64
	for _, m := range msgs {
		text += int64(len(m.Text))
	}
	t.Logf("%s: %d messages (%d MiB of text) in a %d MiB native file (%d message lines) adopted in %d appends and moved in %v: %.1fx etcd's %d MiB quota; etcd file at most %d KiB, %d KiB in use at the end",
		sc.agent, sc.total, text>>20, adopted>>20, lines, sc.steps, time.Since(start).Round(time.Second), float64(text)/float64(sc.quota), sc.quota>>20, maxFile>>10, inUse>>10)
	if sc.tenX && text < 10*sc.quota {
		t.Fatalf("history %d bytes is not 10x the quota", text)
	}
	if maxFile >= sc.quota {
		t.Fatalf("etcd's file reached %d bytes, quota %d", maxFile, sc.quota)
	}
	// As TestTierKeepsEtcdFlat: beside the waiting messages etcd keeps the
	// same bytes but for their client id records and one index entry per
	// segment; records left behind would add ~160 bytes per moved message.
	t.Logf("etcd holds %d KiB beside the message envelopes at %d messages, %d KiB at %d", midKept>>10, midAt, kept>>10, sc.total)
	if grew, bound := kept-midKept, 16<<10+256*(2*sc.hot+int64(sc.total/sc.steps)); grew > bound {
		t.Fatalf("etcd grew %d bytes beside the messages over %d messages; at most %d expected", grew, sc.total-midAt, bound)
	}
	if m, c := testharness.CountKeys(t, r.etcd, "msgs/"), testharness.CountKeys(t, r.etcd, "cids/"); c > m {
		t.Fatalf("etcd holds %d client id records for %d messages: the moved ones' did not leave", c, m)
	}

	testharness.ResetPeakRSS()
	r.checkExport(id, msgs)
	t.Logf("peak memory exporting: %s", testharness.PeakMemory())
	r.stopNode() // the restore is on a machine whose node no longer follows the file
	if err := os.Remove(file.adoptedAt); err != nil {
		t.Fatal(err)
	}
	r.checkRestore(id, msgs)
}

// conversation is sc's messages: user and assistant in turn.
func conversation(sc adoptScale) []transcript.Message {
	rng := rand.New(rand.NewPCG(7, 8))
	out := make([]transcript.Message, sc.total)
	for i := range out {
		kind := transcript.KindUser
		if i%2 == 1 {
			kind = transcript.KindAssistant
		}
		// Trimmed: a reader may not keep a text's outer blanks.
		out[i] = transcript.Message{Kind: kind, Text: strings.TrimSpace(testharness.Pooled(rng, sc.size))}
	}
	return out
}

// adoptTierRig is a control plane over an etcd with a small quota and a
// real S3 server, a node adopting sc.agent's sessions from its home, and
// a second replica's store that moves history by its own clock.
type adoptTierRig struct {
	t        *testing.T
	sc       adoptScale
	addr     string
	c        *client.Client
	etcd     *clientv3.Client
	mover    *store.Store
	clock    time.Time
	home     string // the node's agent folder
	stopNode func()
}

func newAdoptTierRig(t *testing.T, sc adoptScale) *adoptTierRig {
	ep := testharness.StartEtcd(t, func(c *testharness.EtcdConfig) { c.QuotaBytes = sc.quota })
	s3 := s3test.Start(t)
	tc := store.DefaultTierConfig()
	tc.HotMessages, tc.MinSegment, tc.SegmentMessages, tc.DedupeWindow = sc.hot, sc.hot, sc.segN, time.Hour
	srv := testharness.StartControlPlane(t, func(c *controlplane.Config) {
		c.EtcdEndpoints, c.DataDir = []string{ep}, ""
		c.SecretsKeyFile = filepath.Join(t.TempDir(), controlplane.SecretsKeyFileName)
		c.Store.QuotaBytes, c.Store.QuotaPoll = sc.quota, 10*time.Millisecond
		c.Objects.S3, c.Tier = s3.Config(), tc
		c.Tier.Every = time.Hour // the mover below moves, at its clock
	})
	r := &adoptTierRig{t: t, sc: sc, addr: srv.Addr(), c: testharness.Dial(t, srv.Addr()), clock: time.Now()}
	r.mover = testharness.OpenStore(t, ep, func(c *store.Config) { c.QuotaBytes = sc.quota })
	if err := r.mover.UseObjects(s3.Open(t), tc, nil); err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	r.etcd = cli
	r.stopNode = testharness.StartNode(t, srv.Addr(), "n1", func(c *node.Config) {
		c.Adopt, c.AdoptAgents, c.AdoptInterval = true, []string{sc.agent}, 100*time.Millisecond
		ag, _ := agents.Lookup(sc.agent)
		r.home = ag.Dir(c.UserEnv)
	})
	return r
}

// nativeFile is the generated native session: where the writer wrote it,
// where its lines end, and where it is adopted from in the node's home.
type nativeFile struct {
	path, adoptedAt string
	ends            []int64 // ends[i]: the offset after line i (ends[0] the header's)
}

// generate writes msgs with the agent's own writer in a scratch folder,
// copies what else it wrote (Gemini's project marker) to the node's
// agent folder, and returns the session file to grow there.
func (r *adoptTierRig) generate(msgs []transcript.Message) nativeFile {
	t := r.t
	gen := t.TempDir()
	w, err := agents.WriterFor(r.sc.agent, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := w.Write(agents.Target{Home: gen, Cwd: t.TempDir(), NativeID: agents.NewNativeID(r.sc.agent)}, msgs)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(gen, out.Path)
	if err != nil {
		t.Fatal(err)
	}
	f := nativeFile{path: out.Path, adoptedAt: filepath.Join(r.home, rel), ends: lineEnds(t, out.Path)}
	// The writer writes a header line, then a line per message: a prefix
	// of lines is the session as its CLI had written it so far.
	if len(f.ends) != len(msgs)+1 {
		t.Fatalf("%s's writer wrote %d lines for %d messages; this test cuts the file a message a line", r.sc.agent, len(f.ends), len(msgs))
	}
	err = filepath.WalkDir(gen, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == out.Path {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		dst := filepath.Join(r.home, strings.TrimPrefix(p, gen))
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(f.adoptedAt), 0o700); err != nil {
		t.Fatal(err)
	}
	return f
}

// lineEnds are the offsets after each line of the file at path.
func lineEnds(t *testing.T, path string) []int64 {
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var ends []int64
	br, off := bufio.NewReaderSize(fh, 1<<20), int64(0)
	for {
		chunk, err := br.ReadSlice('\n')
		off += int64(len(chunk))
		if err == nil {
			ends = append(ends, off)
			continue
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != io.EOF || len(chunk) > 0 {
			t.Fatalf("%s: %v (or no newline at its end)", path, err)
		}
		return ends
	}
}

// grow appends the native file's lines up to message upto to the copy in
// the node's home, as the agent appends them, and returns the bytes added.
func (r *adoptTierRig) grow(f nativeFile, upto int) int64 {
	t := r.t
	dst, err := os.OpenFile(f.adoptedAt, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	at, err := dst.Seek(0, io.SeekEnd)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(f.path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	n := f.ends[upto] - at
	if _, err := io.Copy(dst, io.NewSectionReader(src, at, n)); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitAdopted waits until the adopted session holds upto messages and
// returns its id (found on the first call, id "").
func (r *adoptTierRig) waitAdopted(id string, upto int64) string {
	t := r.t
	var last int64
	moved := time.Now()
	testharness.WaitFor(t, 10*time.Minute, fmt.Sprintf("the node adopts %d messages", upto), func() bool {
		if id == "" {
			resp, err := r.c.Sessions.ListSessions(context.Background(), &castv1.ListSessionsRequest{})
			if err != nil || len(resp.Sessions) == 0 {
				return false
			}
			if len(resp.Sessions) > 1 || resp.Sessions[0].GetOrigin().GetAgent() != r.sc.agent {
				t.Fatalf("sessions %v: want the one adopted %s session", resp.Sessions, r.sc.agent)
			}
			id = resp.Sessions[0].Id
		}
		s, err := r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{SessionId: id})
		if err != nil {
			t.Fatal(err)
		}
		if s.LastSeq > upto {
			t.Fatalf("session %s holds %d messages; the file %d", id, s.LastSeq, upto)
		}
		if s.LastSeq != last {
			last, moved = s.LastSeq, time.Now()
		}
		if time.Since(moved) > 2*time.Minute {
			// A step etcd cannot take before the next move (the node's
			// log says RESOURCE_EXHAUSTED): the test's sizes are wrong.
			t.Fatalf("adoption stalled at %d of %d messages", last, upto)
		}
		return last == upto
	})
	return id
}

// sameMessage says how got differs from want ("" when it does not).
func sameMessage(i int, got, want transcript.Message) string {
	if got.Kind != want.Kind || got.Text != want.Text {
		return fmt.Sprintf("message %d is a %v of %d bytes %.40q, want a %v of %d bytes %.40q", i+1, got.Kind, len(got.Text), got.Text, want.Kind, len(want.Text), want.Text)
	}
	return ""
}

// checkExport exports the session through the API, page by page, and
// checks every message against msgs, in order.
func (r *adoptTierRig) checkExport(id string, msgs []transcript.Message) {
	t := r.t
	start := time.Now()
	stream, err := r.c.Sessions.ExportSession(context.Background(), &castv1.ExportSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	n, size := 0, 0
	for {
		page, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("export after %d messages: %v", n, err)
		}
		for _, m := range page.Messages {
			if n >= len(msgs) || m.Seq != int64(n+1) {
				t.Fatalf("export: message %d has seq %d (of %d)", n+1, m.Seq, len(msgs))
			}
			got := transcript.Message{Kind: transcript.Kind(m.Kind), Text: m.Text}
			if d := sameMessage(n, got, msgs[n]); d != "" {
				t.Fatal("export: " + d)
			}
			n, size = n+1, size+len(m.Text)
		}
	}
	if n != len(msgs) {
		t.Fatalf("export read %d of %d messages", n, len(msgs))
	}
	t.Logf("export read back all %d messages (%d MiB) in order in %v", n, size>>20, time.Since(start).Round(time.Millisecond))
}

// checkRestore runs `cast restore` (in this process) into the node's
// agent folder, the native file gone, and reads the file it wrote with
// the agent's reader: every message, in order.
func (r *adoptTierRig) checkRestore(id string, msgs []transcript.Message) {
	t := r.t
	t.Setenv("CAST_ADDR", r.addr)
	t.Setenv("CAST_TOKEN", testharness.AdminToken())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir()) // the export log
	var out, errOut bytes.Buffer
	start := time.Now()
	testharness.ResetPeakRSS()
	if code := cli.Main(context.Background(), []string{"restore", id, "--home", r.home}, nil, &out, &errOut); code != 0 {
		t.Fatalf("cast restore: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	took := time.Since(start)
	t.Logf("peak memory restoring: %s", testharness.PeakMemory())
	s, err := r.c.Sessions.GetSession(context.Background(), &castv1.GetSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	ag, _ := agents.Lookup(r.sc.agent)
	d, _ := ag.Driver()
	path := d.FindSession(r.home, s.GetOrigin().GetNativeId())
	if path == "" {
		t.Fatalf("cast restore wrote no %s session %s under %s: %s", r.sc.agent, s.GetOrigin().GetNativeId(), r.home, out.String())
	}
	rd, err := agents.ReaderFor(r.sc.agent)
	if err != nil {
		t.Fatal(err)
	}
	back, err := rd.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(msgs) {
		t.Fatalf("the restored file holds %d messages, the session %d", len(back), len(msgs))
	}
	for i := range back {
		if d := sameMessage(i, back[i], msgs[i]); d != "" {
			t.Fatal("restored file: " + d)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cast restore rebuilt the %d MiB %s file with all %d messages in order in %v", fi.Size()>>20, r.sc.agent, len(back), took.Round(time.Millisecond))
}
