package adopt_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/adopt"
	_ "github.com/cast-dev/cast/internal/agents/codecs" // links the drivers
	"github.com/cast-dev/cast/internal/exportlog"
)

// sink keeps what the follower sends, as the control plane would: one
// session per native id, each client id stored once.
type sink struct {
	batches []adopt.Batch
	ids     map[string]bool // session/client id
	fail    int             // refuse this many calls first
	failAt  int             // refuse the call of this number (1-based) too
	calls   int
	during  func() // run once, at the next call
}

func (s *sink) Adopt(_ context.Context, b adopt.Batch) (string, error) {
	s.calls++
	if s.during != nil {
		s.during()
		s.during = nil
	}
	if s.fail > 0 || s.calls == s.failAt {
		s.fail = max(s.fail-1, 0)
		return "", errors.New("refused")
	}
	if s.ids == nil {
		s.ids = map[string]bool{}
	}
	id := b.SessionID
	if id == "" {
		id = "cast-" + b.NativeID
	}
	for _, m := range b.Messages {
		if s.ids[id+"/"+m.ClientID] { // a session's client ids, as the store keys them
			return "", fmt.Errorf("client id %s sent twice", m.ClientID)
		}
		s.ids[id+"/"+m.ClientID] = true
	}
	s.batches = append(s.batches, b)
	return id, nil
}

func (s *sink) MaxMessageBytes() int { return 0 }
func (s *sink) MaxBatchBytes() int   { return 0 }

// texts are the message texts of batches from i on.
func (s *sink) texts(from int) []string {
	var out []string
	for _, b := range s.batches[from:] {
		for _, m := range b.Messages {
			out = append(out, m.Text)
		}
	}
	return out
}

type castFiles struct {
	runs     map[string]bool
	busy     map[string]bool
	wrote    map[string]exportlog.Record
	sessions map[string]string           // native id: the cast session whose it is
	exported map[string]exportlog.Record // by agent#native id
	scratch  map[string]bool             // the folders of cast's own scratch runs
}

func (c castFiles) Scratch(cwd string) bool { return c.scratch[cwd] }

func (c castFiles) Runs(_, path, _ string) bool { return c.runs[path] }
func (c castFiles) Busy(agent string) bool      { return c.busy[agent] }
func (c castFiles) SessionOf(_, nativeID string) string {
	return c.sessions[nativeID]
}
func (c castFiles) Wrote(path string) (exportlog.Record, bool) {
	r, ok := c.wrote[path]
	return r, ok
}
func (c castFiles) Exported(agent, nativeID string) (exportlog.Record, bool) {
	r, ok := c.exported[agent+"#"+nativeID]
	return r, ok
}

const nativeID = "5b0c6b4e-3f7e-4e34-9a51-000000000001"

// line is one Claude Code record.
func line(kind, uuid, parent, text string) string {
	p := "null"
	if parent != "" {
		p = `"` + parent + `"`
	}
	content := `"` + text + `"`
	if kind == "assistant" {
		content = `[{"type":"text","text":"` + text + `"}]`
	}
	return fmt.Sprintf(`{"type":%q,"uuid":%q,"parentUuid":%s,"sessionId":%q,"cwd":"/work/proj","timestamp":"2026-01-01T00:00:0%sZ","message":{"role":%q,"content":%s}}`+"\n",
		kind, uuid, p, nativeID, uuid[1:], kind, content)
}

type rig struct {
	t     *testing.T
	agent string
	home  string
	file  string
	state string
	sink  *sink
	cast  castFiles
}

func newRig(t *testing.T) *rig {
	home := t.TempDir()
	file := filepath.Join(home, "projects", "-work-proj", nativeID+".jsonl")
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, agent: "claude", home: home, file: file, state: t.TempDir(), sink: &sink{},
		cast: castFiles{runs: map[string]bool{}, busy: map[string]bool{}, wrote: map[string]exportlog.Record{}}}
}

func (r *rig) write(lines ...string) {
	r.t.Helper()
	if err := os.WriteFile(r.file, []byte(strings.Join(lines, "")), 0o600); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) append(s string) {
	r.t.Helper()
	f, err := os.OpenFile(r.file, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		r.t.Fatal(err)
	}
}

// scan runs a fresh follower (as a restarted node would) over the rig's
// state and returns the texts it sent.
func (r *rig) scan() []string {
	r.t.Helper()
	f, err := adopt.New([]adopt.Source{{Agent: r.agent, Home: r.home}}, r.state, r.sink, r.cast, zap.NewNop())
	if err != nil {
		r.t.Fatal(err)
	}
	before := len(r.sink.batches)
	n, err := f.Scan(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	got := r.sink.texts(before)
	if n != len(got) {
		r.t.Fatalf("Scan said %d messages, sent %d", n, len(got))
	}
	return got
}

func want(t *testing.T, step string, got []string, w ...string) {
	t.Helper()
	if !slices.Equal(got, w) {
		t.Fatalf("%s: sent %q, want %q", step, got, w)
	}
}

// A session that ran in a scratch folder of cast's (a probe's, whose
// removal missed it) is never adopted, new or grown.
func TestFollowLeavesScratchRunsOut(t *testing.T) {
	r := newRig(t)
	r.cast.scratch = map[string]bool{"/work/proj": true}
	r.write(line("user", "u1", "", "probe"), line("assistant", "a2", "u1", "OK"))
	want(t, "new", r.scan())
	r.append(line("user", "u3", "a2", "more"))
	want(t, "grown", r.scan())
}

// A new file is imported once, with its cwd and title; what it grows by
// arrives once; a half-written line waits for its end.
func TestFollowGrowth(t *testing.T) {
	r := newRig(t)
	r.write(line("user", "u1", "", "hello"), line("assistant", "a2", "u1", "hi there"))
	want(t, "import", r.scan(), "hello", "hi there")
	b := r.sink.batches[0]
	if b.SessionID != "" || b.NativeID != nativeID || b.Cwd != "/work/proj" || b.History != 2 || b.Title != "hello" || b.Path != r.file {
		t.Fatalf("first batch %+v", b)
	}
	want(t, "unchanged", r.scan())
	half := line("user", "u3", "a2", "more")
	r.append(half[:20])
	want(t, "half a line", r.scan())
	r.append(half[20:] + line("assistant", "a4", "u3", "sure"))
	want(t, "grown", r.scan(), "more", "sure")
	if last := r.sink.batches[len(r.sink.batches)-1]; last.SessionID != "cast-"+nativeID {
		t.Fatalf("growth went to session %q", last.SessionID)
	}
	// The same text again is a new message, not a repeat of the first.
	r.append(line("user", "u5", "a4", "hello"))
	want(t, "repeated text", r.scan(), "hello")
}

// A rewritten file (its start changed) is read again: only the messages
// not kept before are sent.
func TestFollowRewrite(t *testing.T) {
	r := newRig(t)
	r.write(line("user", "u1", "", "hello"), line("assistant", "a2", "u1", "hi"))
	want(t, "import", r.scan(), "hello", "hi")
	// The same records, re-encoded (a summary line first), and one more.
	r.write(`{"type":"summary","summary":"greeting","leafUuid":"a2"}`+"\n",
		line("user", "u1", "", "hello"), line("assistant", "a2", "u1", "hi"), line("user", "u3", "a2", "bye"))
	want(t, "rewrite", r.scan(), "bye")
}

// A file cut short sends nothing and deletes nothing; growing again after
// the cut sends only what is new.
func TestFollowTruncation(t *testing.T) {
	r := newRig(t)
	r.write(line("user", "u1", "", "one"), line("assistant", "a2", "u1", "two"), line("user", "u3", "a2", "three"))
	want(t, "import", r.scan(), "one", "two", "three")
	r.write(line("user", "u1", "", "one"))
	want(t, "truncated", r.scan())
	r.append(line("assistant", "a4", "u1", "four"))
	want(t, "grown after the cut", r.scan(), "four")
	r.write(line("user", "u1", "", "one"), line("assistant", "a2", "u1", "two"), line("user", "u3", "a2", "three"), line("assistant", "a4", "u1", "four"))
	want(t, "whole again", r.scan())
}

// A file of a session cast runs is never adopted; a file cast wrote (a
// restore, here over the path of a file adopted before and deleted) is
// that cast session's: nothing is sent for what cast wrote, and what the
// agent adds later goes to that session.
func TestFollowCastFiles(t *testing.T) {
	r := newRig(t)
	r.write(line("user", "u1", "", "hello"), line("assistant", "a2", "u1", "hi"))
	r.cast.runs[r.file] = true
	want(t, "cast runs it", r.scan())
	r.cast.runs[r.file] = false
	r.cast.busy["claude"] = true
	want(t, "a new file while cast runs a claude CLI", r.scan())
	r.cast.busy["claude"] = false
	want(t, "adopted once cast no longer runs it", r.scan(), "hello", "hi")
	r.cast.busy["claude"] = true
	r.append(line("user", "u3", "a2", "while busy"))
	want(t, "a file adopted before goes on while cast runs a claude CLI", r.scan(), "while busy")
	r.cast.busy["claude"] = false
	if err := os.Remove(r.file); err != nil {
		t.Fatal(err)
	}
	want(t, "deleted", r.scan())
	// Restored: cast's writer words it otherwise (a summary first).
	r.write(`{"type":"summary","summary":"restored","leafUuid":"a2"}`+"\n", line("user", "u1", "", "hello"), line("assistant", "a2", "u1", "hi, restored"))
	sum, err := exportlog.FileSHA256(r.file)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(r.file)
	r.cast.wrote[r.file] = exportlog.Record{NativeID: nativeID, Path: r.file, SHA256: sum, SessionID: "s-restored", Size: fi.Size()}
	r.append(line("user", "u3", "a2", "resumed"))
	from := len(r.sink.batches)
	want(t, "restored and resumed", r.scan(), "resumed")
	if got := r.sink.batches[from].SessionID; got != "s-restored" {
		t.Fatalf("growth of a restored file went to %q", got)
	}
	want(t, "unchanged", r.scan())
	r.append(line("assistant", "a4", "u3", "welcome back"))
	want(t, "grown again", r.scan(), "welcome back")
}

// A file the sink refuses is tried again later, less often the more it
// failed, and then sent whole; other files go on meanwhile.
func TestFollowBacksOffAFailingFile(t *testing.T) {
	r := newRig(t)
	r.write(line("user", "u1", "", "hello"))
	f, err := adopt.New([]adopt.Source{{Agent: "claude", Home: r.home}}, r.state, r.sink, r.cast, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	r.sink.fail = 2
	var calls []int
	for range 5 {
		_, _ = f.Scan(context.Background())
		calls = append(calls, r.sink.calls)
	}
	// Fails at scan 1 (skips 1), fails at scan 3 (skips 2), sent at scan 6.
	if want := []int{1, 1, 2, 2, 2}; !slices.Equal(calls, want) {
		t.Fatalf("sink calls after each scan %v, want %v", calls, want)
	}
	if _, err := f.Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	want(t, "sent once the sink takes it", r.sink.texts(0), "hello")
}

// A subagent's run the agent keeps beside its sessions (a Codex thread
// another thread spawned, a Claude subagents/agent-*.jsonl, a Gemini
// chats/<parent>/ session) is sent with its parent's native id, after its
// parent (the control plane nests it under the session adopted for that
// one); a session of its own is sent without. A run a cast session's turn
// started (its parent is a native session cast runs) is sent as that
// session's worker.
func TestFollowSubagentRunNamesItsParent(t *testing.T) {
	const (
		codexParent  = "019a0000-0000-7000-8000-0000000000aa"
		codexRun     = "019a0000-0000-7000-8000-0000000000bb"
		claudeParent = "5b0f8a7e-0000-4e1f-9a8b-7c6d5e4f3a2b"
		geminiParent = "8e7d6c5b-0000-4281-b7c6-d5e4f3a2b1c0"
		geminiRun    = "a40fe8f2-8f98-411b-9b09-2412a101bb9a"
	)
	rollout := func(id, source string) string {
		return `{"timestamp":"2026-11-30T10:00:00.000Z","type":"session_meta","payload":{"id":"` + id + `","timestamp":"2026-11-30T10:00:00.000Z","cwd":"/w","originator":"codex_cli_rs","cli_version":"0.171.0","source":` + source + `}}
{"timestamp":"2026-11-30T10:00:01.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"task ` + id + `"}]}}
{"timestamp":"2026-11-30T10:00:02.000Z","type":"event_msg","payload":{"type":"token_count"}}
`
	}
	claudeRec := func(side bool, agentID string) string {
		return fmt.Sprintf(`{"parentUuid":null,"isSidechain":%v,"agentId":%q,"type":"user","message":{"role":"user","content":"task %v"},"uuid":"u-%v","timestamp":"2026-11-30T10:00:00.000Z","cwd":"/w","sessionId":%q}`+"\n",
			side, agentID, side, side, claudeParent)
	}
	gemini := func(id, kind string) string {
		return `{"sessionId":"` + id + `","projectHash":"h","startTime":"2026-11-30T10:00:00.000Z","lastUpdated":"2026-11-30T10:00:00.000Z","kind":"` + kind + `"}
{"id":"r1","timestamp":"2026-11-30T10:00:01.000Z","type":"user","content":[{"text":"task ` + id + `"}]}
`
	}
	claudeFiles := map[string]string{
		"projects/-w/" + claudeParent + ".jsonl":                            claudeRec(false, ""),
		"projects/-w/" + claudeParent + "/subagents/agent-a1b2c3.jsonl":     claudeRec(true, "a1b2c3"),
		"projects/-w/" + claudeParent + "/subagents/agent-a1b2c3.meta.json": `{"agentType":"general-purpose","toolUseId":"toolu_1"}`,
	}
	for _, tc := range []struct {
		name, agent string
		files       map[string]string
		castRuns    string            // the file of a session cast runs, "" for none
		want        map[string]string // native id: the parent it is sent with (its native id, or "session " and the cast session; then the call)
		order       []string          // native ids, in the order first sent
	}{
		{"codex", "codex", map[string]string{
			"sessions/2026/11/30/rollout-2026-11-30T10-00-00-" + codexParent + ".jsonl": rollout(codexParent, `"cli"`),
			"sessions/2026/11/30/rollout-2026-11-30T10-00-05-" + codexRun + ".jsonl": rollout(codexRun,
				`{"subagent":{"thread_spawn":{"parent_thread_id":"`+codexParent+`","depth":1}}}`),
		}, "", map[string]string{codexParent: "", codexRun: codexParent}, []string{codexParent, codexRun}},
		{"claude", "claude", claudeFiles, "", map[string]string{claudeParent: "", "agent-a1b2c3": claudeParent + " call toolu_1"}, []string{claudeParent, "agent-a1b2c3"}},
		{"a run of a cast session's turn", "claude", claudeFiles, "projects/-w/" + claudeParent + ".jsonl",
			map[string]string{"agent-a1b2c3": "session cast-7 call toolu_1"}, []string{"agent-a1b2c3"}},
		{"gemini", "gemini", map[string]string{
			"tmp/w/chats/session-2026-11-30T10-00-" + geminiParent[:8] + ".jsonl": gemini(geminiParent, "main"),
			"tmp/w/chats/" + geminiParent + "/" + geminiRun + ".jsonl":            gemini(geminiRun, "subagent"),
		}, "", map[string]string{geminiParent: "", geminiRun: geminiParent}, []string{geminiParent, geminiRun}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			home := t.TempDir()
			for name, body := range tc.files {
				path := filepath.Join(home, name)
				if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cast := castFiles{runs: map[string]bool{}, busy: map[string]bool{}, wrote: map[string]exportlog.Record{}, sessions: map[string]string{}}
			if tc.castRuns != "" {
				cast.runs[filepath.Join(home, tc.castRuns)] = true
				cast.sessions[claudeParent] = "cast-7"
			}
			s := &sink{}
			f, err := adopt.New([]adopt.Source{{Agent: tc.agent, Home: home}}, t.TempDir(), s, cast, zap.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Scan(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			var order []string
			for _, b := range s.batches {
				if _, seen := got[b.NativeID]; !seen {
					order = append(order, b.NativeID)
				}
				got[b.NativeID] = b.ParentNativeID
				if b.ParentSessionID != "" {
					got[b.NativeID] = "session " + b.ParentSessionID
				}
				if b.ParentCallID != "" {
					got[b.NativeID] += " call " + b.ParentCallID
				}
			}
			if !maps.Equal(got, tc.want) || !slices.Equal(order, tc.order) {
				t.Fatalf("sent %v in order %v, want %v in order %v", got, order, tc.want, tc.order)
			}
		})
	}
}

// A run a session's file keeps inside it (pi's subagent extension keeps it
// in its tool result; the fixture is internal/agents/pi's) is adopted as a
// worker of the session adopted for the file, named after the spawning
// call, once: a scan of the unchanged file, or of the file grown by a
// turn, sends it no second time.
func TestFollowAdoptsRunsKeptInsideAFile(t *testing.T) {
	data, err := os.ReadFile("../agents/pi/testdata/subagent_run.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	path := filepath.Join(home, "sessions", "--w--", "2026-11-30T10-00-00-000Z_sub-run-uuid.jsonl")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	s := &sink{}
	f, err := adopt.New([]adopt.Source{{Agent: "pi", Home: home}}, t.TempDir(), s,
		castFiles{runs: map[string]bool{}, busy: map[string]bool{}, wrote: map[string]exportlog.Record{}, sessions: map[string]string{}}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	grown := `{"type":"message","id":"u9","parentId":"a2","timestamp":"2026-11-30T10:01:00.000Z","message":{"role":"user","content":[{"type":"text","text":"PISUB-U9 thanks"}],"timestamp":1796032860000}}` + "\n"
	if err := os.WriteFile(path, append(data, grown...), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := f.Scan(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var runs []adopt.Batch
	for _, b := range s.batches {
		if b.NativeID != "sub-run-uuid" {
			runs = append(runs, b)
		}
	}
	if len(runs) != 1 {
		t.Fatalf("%d batches of runs, want 1: %+v", len(runs), runs)
	}
	b := runs[0]
	if b.NativeID != "sub-run-uuid#run-call_sub1" || b.ParentSessionID != "cast-sub-run-uuid" || b.ParentCallID != "call_sub1" || b.ParentNativeID != "" {
		t.Fatalf("the run was sent as %s under session %q native %q call %q; want a worker of the file's session started by call_sub1",
			b.NativeID, b.ParentSessionID, b.ParentNativeID, b.ParentCallID)
	}
	if texts := strings.Join(s.texts(0), "|"); !strings.Contains(texts, "Task: PISUB-TASK") || !strings.Contains(texts, "PISUB-U9") {
		t.Fatalf("sent %q; want the run's task and the grown turn", texts)
	}
}

// codexRollout is where Codex keeps rollout id under home (its folder made).
func codexRollout(t *testing.T, home, id string) string {
	t.Helper()
	path := filepath.Join(home, "sessions", "2026", "11", "30", "rollout-2026-11-30T10-00-00-"+id+".jsonl")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

// A Codex rollout read between a message's item and its event copy (the
// CLI writes them a moment apart) keeps the message once: the trailing
// pair waits for the record after it.
func TestFollowCodexBetweenAMessagesTwoRecords(t *testing.T) {
	home := t.TempDir()
	id := "019a0000-0000-7000-8000-0000000000cc"
	path := codexRollout(t, home, id)
	write := func(lines ...string) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, l := range lines {
			if _, err := f.WriteString(l + "\n"); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(`{"timestamp":"2026-11-30T10:00:00.000Z","type":"session_meta","payload":{"id":"`+id+`","timestamp":"2026-11-30T10:00:00.000Z","cwd":"/w","originator":"codex_cli_rs","cli_version":"0.171.0","source":"cli"}}`,
		`{"timestamp":"2026-11-30T10:00:01.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"PAIR-1 hello"}]}}`)
	s := &sink{}
	cast := castFiles{runs: map[string]bool{}, busy: map[string]bool{}, wrote: map[string]exportlog.Record{}, sessions: map[string]string{}}
	f, err := adopt.New([]adopt.Source{{Agent: "codex", Home: home}}, t.TempDir(), s, cast, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if n, err := f.Scan(context.Background()); err != nil || n != 0 {
		t.Fatalf("first scan, the copy not written yet: sent %d, %v; want nothing yet", n, err)
	}
	write(`{"timestamp":"2026-11-30T10:00:01.001Z","type":"event_msg","payload":{"type":"user_message","message":"PAIR-1 hello","images":null}}`,
		`{"timestamp":"2026-11-30T10:00:02.000Z","type":"event_msg","payload":{"type":"token_count"}}`)
	if _, err := f.Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	users := 0
	for _, b := range s.batches {
		for _, m := range b.Messages {
			if m.Text == "PAIR-1 hello" {
				users++
			}
		}
	}
	if users != 1 {
		t.Fatalf("the user message was kept %d times; want once", users)
	}
}

// A growth sent in more than one batch whose later batch fails (the
// control plane restarting, the node killed after a batch was kept) is
// sent again from where it stopped: the messages a batch kept are not
// stored a second time under other client ids. So too when nothing was
// kept of the file before the growth (a Codex rollout read while its
// first message was being written: its header only), which once left no
// record that the tail being sent began with nothing kept, and the
// restarted node sent the first batch again under new client ids.
func TestFollowGrowthResentAfterAFailedBatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start string   // the file when first followed
		sent  []string // what that sends
	}{
		{"after a message", line("user", "u1", "", "hello"), []string{"hello"}},
		{"after a header only", `{"type":"summary","summary":"nothing yet","leafUuid":"x"}` + "\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			r.write(tc.start)
			want(t, "import", r.scan(), tc.sent...)
			var grown []string
			var texts []string
			for i := range 501 { // more than one batch (batchMsgs)
				text := fmt.Sprintf("m%d", i)
				grown = append(grown, line("user", fmt.Sprintf("u%d", i+10), "", text))
				texts = append(texts, text)
			}
			r.append(strings.Join(grown, ""))
			f, err := adopt.New([]adopt.Source{{Agent: r.agent, Home: r.home}}, r.state, r.sink, r.cast, zap.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			before := len(r.sink.batches)
			r.sink.failAt = r.sink.calls + 2 // the second batch fails
			if _, err := f.Scan(context.Background()); err == nil {
				t.Fatal("the scan whose second batch failed said nothing")
			}
			want(t, "first batch", r.sink.texts(before), texts[:500]...)
			want(t, "the rest, once, after a restart", r.scan(), texts[500:]...)
		})
	}
}

// A file that held no message yet when a node last looked (an agent's
// header written first) is followed as it grows after the node restarts.
func TestFollowGrowthAfterRestartOfAFileWithoutMessages(t *testing.T) {
	r := newRig(t)
	r.write(`{"type":"summary","summary":"nothing yet","leafUuid":"x"}` + "\n")
	want(t, "no message yet", r.scan())
	r.append(line("user", "u1", "", "hello"))
	want(t, "grown, after a restart", r.scan(), "hello")
}

// A Codex rollout rewritten (not grown: its start changed) within the
// settle window is read to a line's end, never to the byte count read of
// the old content, which falls anywhere in the new one: a cut there left
// the rest of that line, a message, unparsable to every later read.
func TestFollowCodexRewrittenWhileSettling(t *testing.T) {
	home := t.TempDir()
	id := "019a0000-0000-7000-8000-0000000000dd"
	path := codexRollout(t, home, id)
	meta := func(cwd string) string {
		return `{"timestamp":"2026-11-30T10:00:00.000Z","type":"session_meta","payload":{"id":"` + id + `","timestamp":"2026-11-30T10:00:00.000Z","cwd":"` + cwd + `","originator":"codex_cli_rs","cli_version":"0.171.0","source":"cli"}}` + "\n"
	}
	pair := `{"timestamp":"2026-11-30T10:00:01.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"REWRITE-1 hello"}]}}` + "\n" +
		`{"timestamp":"2026-11-30T10:00:01.001Z","type":"event_msg","payload":{"type":"user_message","message":"REWRITE-1 hello","images":null}}` + "\n"
	other := `{"timestamp":"2026-11-30T10:00:02.000Z","type":"event_msg","payload":{"type":"token_count"}}` + "\n"
	answer := func(text string) string {
		return `{"timestamp":"2026-11-30T10:00:03.000Z","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"` + text + `"}]}}` + "\n"
	}
	first := meta("/w") + pair + other
	if err := os.WriteFile(path, []byte(first), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &sink{}
	cast := castFiles{runs: map[string]bool{}, busy: map[string]bool{}, wrote: map[string]exportlog.Record{}, sessions: map[string]string{}}
	state := t.TempDir()
	scan := func(step string, w ...string) {
		t.Helper()
		f, err := adopt.New([]adopt.Source{{Agent: "codex", Home: home}}, state, s, cast, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		before := len(s.batches)
		if _, err := f.Scan(context.Background()); err != nil {
			t.Fatal(err)
		}
		want(t, step, s.texts(before), w...)
	}
	scan("import", "REWRITE-1 hello")
	// Rewritten: a longer folder first, so the byte count read before
	// falls inside the first answer's line; the answers end the file (a
	// run of message records the settle window holds back).
	kept := len(first)
	pad := kept - 10 - len(meta("/w")+pair)
	rewritten := meta("/w"+strings.Repeat("x", pad)) + pair + answer("REWRITE-2 first answer") + answer("REWRITE-3 second answer")
	start := len(meta("/w"+strings.Repeat("x", pad)) + pair)
	if start >= kept || start+len(answer("REWRITE-2 first answer")) <= kept {
		t.Fatalf("set-up: the old size %d is not inside the first answer's line [%d, %d)", kept, start, start+len(answer("REWRITE-2 first answer")))
	}
	if err := os.WriteFile(path, []byte(rewritten), 0o600); err != nil {
		t.Fatal(err)
	}
	scan("rewritten, settling")
	// Settled: written a minute ago.
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	scan("settled", "REWRITE-2 first answer", "REWRITE-3 second answer")
}

// A file left ending in a torn line (its CLI killed mid-write) is not
// read again while it stays as it is: it was read whole (or, for a
// streamed reader, copied whole) and its state written again at every
// scan, every 2 s for as long as the file stayed, hundreds of MB for a
// long session. What it then grows by is read as before.
func TestFollowTornLastLineIsNotReadAgainUntilItChanges(t *testing.T) {
	for _, tc := range []struct {
		name       string
		rig        func(*testing.T) *rig
		first, add string
	}{
		{"claude, read whole", newRig, line("user", "u1", "", "hello"), line("assistant", "a2", "u1", "hi there")},
		{"gemini, streamed", newGeminiRig, geminiHead("2026-11-30T10:00:00.000Z") + geminiLine(0, "hello"), geminiLine(1, "hi there")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.rig(t)
			r.write(tc.first, tc.add[:20]) // the second message torn
			want(t, "import", r.scan(), "hello")
			states, err := filepath.Glob(filepath.Join(r.state, "*.json"))
			if err != nil || len(states) != 1 {
				t.Fatalf("state files %v, %v", states, err)
			}
			before, err := os.Stat(states[0])
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				want(t, "torn, unchanged", r.scan())
			}
			after, err := os.Stat(states[0])
			if err != nil {
				t.Fatal(err)
			}
			if !os.SameFile(before, after) {
				t.Fatal("the state of a file left as it was was written again: the file was read again")
			}
			r.append(tc.add[20:])
			want(t, "the line completed", r.scan(), "hi there")
		})
	}
}

// An agent's folder made after the follower started (the agent first run
// after the node) is looked at by the same follower's next scan.
func TestFollowFolderMadeAfterStart(t *testing.T) {
	r := newRig(t)
	if err := os.RemoveAll(r.home); err != nil {
		t.Fatal(err)
	}
	f, err := adopt.New([]adopt.Source{{Agent: r.agent, Home: r.home}}, r.state, r.sink, r.cast, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if n, err := f.Scan(context.Background()); n != 0 || err != nil {
		t.Fatalf("no folder: %d sent, %v", n, err)
	}
	if err := os.MkdirAll(filepath.Dir(r.file), 0o700); err != nil {
		t.Fatal(err)
	}
	r.write(line("user", "u1", "", "hello"))
	if n, err := f.Scan(context.Background()); n != 1 || err != nil {
		t.Fatalf("the folder made: %d sent, %v; want the session", n, err)
	}
	want(t, "the folder made", r.sink.texts(0), "hello")
}
