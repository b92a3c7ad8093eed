package adopt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/exportlog"
	"github.com/cast-dev/cast/internal/fsutil"
	"github.com/cast-dev/cast/internal/transcript"
)

// Batch is part of one adopted native session, for the Sink.
type Batch struct {
	Agent, NativeID, Path string
	// SessionID is the cast session the file belongs to; "" the first
	// time: the one adopted for (node, Agent, NativeID), made once.
	SessionID string
	Cwd       string // where the native session ran ("" when it does not say)
	Title     string
	// History is how many messages the first import of the file carries
	// in all (only with SessionID "").
	History int64
	// ParentNativeID is set (with SessionID "") when the file holds only a
	// subagent's run that native session spawned; ParentSessionID instead
	// when that native session is a cast session's this node runs.
	ParentNativeID  string
	ParentSessionID string
	ParentCallID    string               // the parent's call that started the run, where the file says
	Messages        []transcript.Message // each with its ClientID
}

// Sink keeps adopted messages: the control plane, through the node.
type Sink interface {
	// Adopt stores b's messages and names the cast session holding them.
	Adopt(ctx context.Context, b Batch) (sessionID string, err error)
	// MaxMessageBytes is the largest message (encoded) the store takes as
	// far as the sink knows, 0 for transcript.DefaultMaxMessageBytes: a control plane
	// configured lower says its limit when it refuses a message, and the
	// batch is fit to it and sent again.
	MaxMessageBytes() int
	// MaxBatchBytes bounds the messages of one Adopt (encoded) as far as
	// the sink knows, 0 for adoption's own bound: a control plane taking
	// smaller requests refuses a batch over its bound, and the batch is
	// sent again in parts under what the sink learned from that.
	MaxBatchBytes() int
}

// Cast says which native files are cast's own.
type Cast interface {
	// Runs says whether path (a file agent's) or nativeID (a session in
	// a store agent's database; path "") is a native session cast runs on
	// this node (its messages come from the turns), or ran for a session
	// the node has let go of since (the session's history is kept already).
	Runs(agent, path, nativeID string) bool
	// Busy says whether cast runs a CLI of agent now: a file new to the
	// follower may be that CLI's, its native id not recorded yet, so it
	// waits (files adopted before go on).
	Busy(agent string) bool
	// Wrote is the record of a file `cast export` or `cast restore`
	// wrote (false for any other file).
	Wrote(path string) (exportlog.Record, bool)
	// Exported is the export log's record of agent's native session
	// nativeID: how a stored session (agents.StoreLister) cast wrote is
	// known, its path being the store's, which every session shares.
	Exported(agent, nativeID string) (exportlog.Record, bool)
	// SessionOf is the cast session this node runs whose native session
	// of agent is nativeID ("" for none): a subagent's run its turn
	// started is that session's worker.
	SessionOf(agent, nativeID string) string
	// Scratch says whether cwd lies in a folder cast runs CLIs in for
	// itself (a readiness probe's): a session that ran there is cast's
	// own whether or not cast learned its id, and is never adopted.
	Scratch(cwd string) bool
}

// Source is one agent's own folder to watch.
type Source struct {
	Agent string
	Home  string
	// Bin and Env run the agent's CLI as a turn would, for an agent whose
	// sessions are in a store only its CLI reads (agents.StoreLister).
	Bin string
	Env []string
}

// Follower adopts and follows the native sessions under its sources.
type Follower struct {
	sources []Source
	sink    Sink
	cast    Cast
	lg      *zap.Logger
	st      *states
	mu      sync.Mutex // one scan at a time
	// failing are the files whose last tries failed: each is left out of
	// as many scans as it failed times doubled (up to maxSkip), so a
	// file the control plane refuses is not sent and logged every scan.
	failing map[string]*backoff
	// listed are the stores (by path) whose last listing left nothing to
	// do, with their stamp then: a store whose stamp has not moved is not
	// listed again (store.go). In memory: a restarted node lists once.
	listed map[string]listing
	// lastListing is when each store's last listing began, whatever it
	// left: a store being written is listed at most every unsettledRelist.
	lastListing map[string]time.Time
	// gone are the followed files found gone, with when that was first
	// seen: their state is dropped once goneGrace has passed (forgetGone).
	gone map[string]time.Time
	now  func() time.Time // time.Now; a test's clock
	// lister finds an agent's StoreLister (storeLister; a test's counts
	// its listings).
	lister func(agent string) (agents.StoreLister, bool)
}

// goneGrace is how long a followed file is gone before its state is
// dropped: a file moved away and back, or replaced by a rename, keeps it.
const goneGrace = 24 * time.Hour

// backoff is a failing file's record.
type backoff struct{ fails, skip int }

// maxSkip bounds a failing file's pause: at the default interval, about
// eight minutes between tries.
const maxSkip = 256

// New makes a follower whose bookkeeping is kept in the folder stateDir.
func New(sources []Source, stateDir string, sink Sink, cast Cast, lg *zap.Logger) (*Follower, error) {
	st, err := loadStates(stateDir)
	if err != nil {
		return nil, err
	}
	return &Follower{sources: sources, sink: sink, cast: cast, lg: lg, st: st, failing: map[string]*backoff{},
		listed: map[string]listing{}, lastListing: map[string]time.Time{}, gone: map[string]time.Time{}, now: time.Now, lister: storeLister}, nil
}

// Scan looks at every native session file once and sends what is new; it
// returns how many messages it sent. A file that fails is logged and
// tried again at a later scan (failing); the others go on.
func (f *Follower) Scan(ctx context.Context) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	total := 0
	var errsSeen []error
	for _, src := range f.sources {
		if sl, ok := f.lister(src.Agent); ok {
			n, err := f.scanStore(ctx, src, sl)
			total += n
			if err != nil {
				errsSeen = append(errsSeen, err)
			}
			continue
		}
		files, listable := agents.NativeSessions(src.Agent, src.Home)
		for _, path := range files {
			if ctx.Err() != nil {
				return total, ctx.Err()
			}
			n, err := f.try(src.Agent, path, func() (int, error) { return f.follow(ctx, src.Agent, path) })
			total += n
			if err != nil {
				errsSeen = append(errsSeen, err)
			}
		}
		if listable {
			if err := f.forgetGone(src.Agent, files); err != nil {
				errsSeen = append(errsSeen, err)
			}
		}
	}
	return total, errors.Join(errsSeen...)
}

// forgetGone drops the state of agent's followed files (and of the runs
// kept inside them) that are gone: neither listed now nor there at all,
// for goneGrace. Each kept a count per message for ever, in memory and on
// disk. A file still there, listed or not, keeps its state, so it is never
// adopted again; one that comes back after its state went is sent again,
// and the control plane keeps it once (same origin, same client ids).
func (f *Follower) forgetGone(agent string, listed []string) error {
	there := make(map[string]bool, len(listed))
	for _, p := range listed {
		there[p] = true
	}
	now := f.now()
	for _, key := range f.st.keys(agent) {
		file := key
		if i := strings.LastIndex(key, "#run-"); i > 0 && !there[key] {
			file = key[:i] // a run kept inside file (followRuns)
		}
		if there[file] || !fsutil.Gone(file) {
			delete(f.gone, key)
			continue
		}
		since, ok := f.gone[key]
		if !ok {
			f.gone[key] = now
			continue
		}
		if now.Sub(since) < goneGrace {
			continue
		}
		delete(f.gone, key)
		delete(f.failing, key)
		if err := f.st.drop(key); err != nil {
			return err
		}
	}
	return nil
}

// try runs one native session's follow under its backoff (key: its file,
// or its store and id), logging a failure.
func (f *Follower) try(agent, key string, follow func() (int, error)) (int, error) {
	if b := f.failing[key]; b != nil && b.skip > 0 {
		b.skip--
		return 0, nil
	}
	n, err := follow()
	if err == nil {
		delete(f.failing, key)
		return n, nil
	}
	b := f.failing[key]
	if b == nil {
		b = &backoff{}
		f.failing[key] = b
	}
	b.fails++
	b.skip = min(1<<min(b.fails-1, 8), maxSkip)
	f.lg.Warn("adopt native session failed", zap.String("agent", agent), zap.String("path", key),
		zap.Int("failures", b.fails), zap.Int("next_try_in_scans", b.skip+1), zap.Error(err))
	return n, fmt.Errorf("%s: %w", key, err)
}

// follow brings one file's new messages to the sink.
func (f *Follower) follow(ctx context.Context, agent, path string) (int, error) {
	fi, st, ok := f.changed(agent, path)
	if !ok {
		return 0, nil
	}
	if sr, ok := streamReader(agent); ok {
		return f.followEach(ctx, agent, path, fi, st, sr)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	whole := int64(bytes.LastIndexByte(data, '\n') + 1) // a half-written last line waits
	if st, err = f.stateOf(agent, path, data[:whole], st); err != nil {
		return 0, err
	}
	end, ok := settledEnd(agent, data[:whole], fi, st)
	if !ok {
		return 0, nil
	}
	msgs, tail, err := f.read(agent, data[:end], st)
	if err != nil {
		return 0, err
	}
	added := data[:end]      // what is new in the file: all of it, or what it grew by
	from := map[string]int{} // a whole file counts occurrences from its start
	if tail {
		added, from = data[st.Size:end], tailFrom(st)
	} else if beginsAgain(st, msgs) {
		from = tailFrom(st) // all it holds came after what was kept
	}
	sent, err := f.send(ctx, agent, fileOrigin(agent, path, st), st, unsent(st.Sent, from, msgs))
	if err != nil {
		return sent, err
	}
	n, err := f.followRuns(ctx, agent, path, st, added)
	if sent += n; err != nil {
		return sent, err
	}
	st.Size, st.Hash, st.ModTime, st.Base = end, hashOf(data[:end]), fi.ModTime().UnixNano(), nil
	st.Torn = int64(len(data)) - end
	for _, m := range msgs {
		st.Newest = max(st.Newest, timeOf(m))
	}
	if end != whole {
		st.ModTime = 0 // look again: whole lines wait for the settle window, not a write
	}
	return sent, f.st.put(path, st)
}

// changed is the file at path and its state (nil: never followed), unless
// it has nothing to follow now (false): gone meanwhile (what was kept
// stays kept), cast's own, unchanged since last followed, or new while
// the agent runs a turn of cast's.
func (f *Follower) changed(agent, path string) (os.FileInfo, *fileState, bool) {
	fi, err := os.Stat(path)
	if err != nil || f.cast.Runs(agent, path, "") {
		return nil, nil, false
	}
	st := f.st.get(path)
	if st != nil && st.Size+st.Torn == fi.Size() && st.ModTime == fi.ModTime().UnixNano() {
		return nil, nil, false
	}
	if st != nil && replaced(agent, path, st) {
		st = nil // another native session: one of its own, what was kept stays kept
	}
	if st == nil && f.cast.Busy(agent) {
		return nil, nil, false // maybe cast's own turn's: looked at once it is over
	}
	return fi, st, true
}

// replaced says whether the file at path, followed as st, is now another
// native session: its own id, as its format says, is not the one st
// keeps. A CLI may start a new session at a path whose file was deleted
// (pi --session writes one under a new id); read as the old one's
// rewrite, its messages went to the old cast session and those matching
// one kept there (the same prompt typed again) were taken as kept and
// lost. An id read from nowhere (the file's name: st's NativeID when the
// file first said none) tells nothing.
func replaced(agent, path string, st *fileState) bool {
	d, ok := driver(agent)
	if !ok || st.NativeID == filepath.Base(path) {
		return false
	}
	id := d.SessionID(path)
	return id != "" && id != st.NativeID
}

// stateOf is the state to follow the file at path from, given its whole
// lines (data) and its state st: a new baseline when cast wrote it (a
// restore) since the follower last looked, a new state for a new file.
func (f *Follower) stateOf(agent, path string, data []byte, st *fileState) (*fileState, error) {
	if rec, ok := f.cast.Wrote(path); ok && rec.SessionID != "" && (st == nil || st.Written != rec.SHA256) {
		var err error
		if st, err = f.baseline(agent, path, inMemory{st: f.st, agent: agent, data: data}, rec); err != nil {
			return nil, err
		}
	}
	if st == nil {
		st = &fileState{Agent: agent, NativeID: nativeID(agent, path), Sent: map[string]int{}}
	}
	return st, nil
}

// settledEnd is how much of data (the file's whole lines) to read: all of
// it once the file is quiet for the settle window, else up to its last
// settled message; false when a rewritten file must wait to be read whole.
func settledEnd(agent string, data []byte, fi os.FileInfo, st *fileState) (int64, bool) {
	end := int64(len(data))
	if time.Since(fi.ModTime()) >= settleWindow {
		return end, true
	}
	kept := keptPrefix(data, st)
	cut := settled(agent, data, kept)
	if cut < end && kept == 0 && st.Size > 0 {
		// Rewritten, its end not settled: read whole once it is. A
		// cut now would leave what was kept (Sent) partly past the
		// bytes recorded as read, and a later tail would count it
		// as new.
		return 0, false
	}
	return cut, true
}

// beginsAgain says whether msgs, all a file followed as st holds now
// that it no longer starts with what was read, are all newer than every
// message read before: the file was deleted and its CLI went on appending
// to a new one (Claude Code, pi and Gemini CLI do; Claude Code's clean-up
// of old sessions deletes the file of one resumed). Its messages all came
// after those kept, a text kept before among them again; read as a
// rewrite of the old file, that text was taken as kept and lost. A
// rewrite holds messages read before, with their times (pi's upgrade of
// an old file gives its entries new ids, so ids do not tell), and so does
// a copy of the old file put back, or one edited or cut short. Messages
// without a time tell nothing.
func beginsAgain(st *fileState, msgs []transcript.Message) bool {
	n := newer{than: st.Newest}
	for _, m := range msgs {
		if !n.see(m) {
			break
		}
	}
	return st.Size > 0 && n.all()
}

// newer tells whether every message seen, of those with a time, is newer
// than than (a time in Unix ns; 0: nothing tells).
type newer struct {
	than         int64
	timed, older bool
}

// see notes m; false once one is not newer (the answer is known).
func (n *newer) see(m transcript.Message) bool {
	t := timeOf(m)
	if t == 0 {
		return true
	}
	n.timed = true
	n.older = n.older || t <= n.than
	return !n.older
}

// all says whether every message seen with a time, and at least one, was
// newer.
func (n *newer) all() bool { return n.than > 0 && n.timed && !n.older }

// timeOf is m's time in Unix ns, 0 when it has none (or one no int64
// holds: before 1678 or after 2262, which no CLI writes).
func timeOf(m transcript.Message) int64 {
	if y := m.Time.Year(); y < 1678 || y > 2261 {
		return 0
	}
	return m.Time.UnixNano()
}

// tailFrom is what a tail's occurrences count from. Appended lines come
// after all kept as of Size: Sent, unless a send of this tail stopped
// part way (a failed batch, a crash after one), which left in Sent what
// it kept of the tail.
func tailFrom(st *fileState) map[string]int {
	if st.Base == nil {
		st.Base = maps.Clone(st.Sent)
	}
	return maps.Clone(st.Base)
}

// fileOrigin is where the file at path comes from, for its sends: for a
// session not adopted yet, its folder and the run that spawned it.
func fileOrigin(agent, path string, st *fileState) origin {
	o := origin{Key: path, Path: path}
	if st.SessionID == "" {
		o.Cwd = cwdOf(agent, path)
		sub := subagentOf(agent, path)
		o.ParentNativeID, o.CallID = sub.ParentNativeID, sub.CallID
	}
	return o
}

// settleWindow is how long after its last write a file may still be
// between the records of one message (agents.TailSettler); a file quiet
// for longer is read whole, whatever it ends with (a CLI killed between
// them writes nothing more).
const settleWindow = 10 * time.Second

// settled is how much of data (whole lines) may be read now: all of it,
// or less where the agent writes one message as records a moment apart
// (agents.TailSettler); never less than kept, what was read before.
func settled(agent string, data []byte, kept int64) int64 {
	ts, ok := agents.DriverAs[agents.TailSettler](agent)
	if !ok {
		return int64(len(data))
	}
	return max(int64(ts.Settled(data)), min(kept, int64(len(data))))
}

// keptPrefix is how many bytes of data are the whole lines read before:
// st.Size while data still starts with them, else 0 (the file was
// rewritten, and that count may fall inside a line of the new content:
// a read cut there left the rest of the line unparsable to every later
// read, TestFollowCodexRewrittenWhileSettling).
func keptPrefix(data []byte, st *fileState) int64 {
	if st.Size > 0 && st.Size <= int64(len(data)) && hashOf(data[:st.Size]) == st.Hash {
		return st.Size
	}
	return 0
}

// baseline is the state of a file cast wrote (a restore): what cast
// wrote is that cast session's already, and only what the agent added
// since is new. c is the file's whole lines.
func (f *Follower) baseline(agent, path string, c content, rec exportlog.Record) (*fileState, error) {
	st := &fileState{Agent: agent, NativeID: nativeID(agent, path), Sent: map[string]int{}, SessionID: rec.SessionID, Written: rec.SHA256}
	size, sum := rec.Size, ""
	var err error
	if size > 0 && size <= c.size() {
		sum, err = c.hash(size)
	}
	if err == nil && (size <= 0 || size > c.size() || sum != rec.SHA256) {
		size = c.size() // changed past recognition: keep what is there as cast's
		sum, err = c.hash(size)
	}
	if err != nil {
		return nil, err
	}
	err = c.each(size, func(m transcript.Message) error {
		st.Sent[digest(m)]++
		return nil
	})
	if err != nil {
		return nil, err
	}
	st.Size, st.Hash = size, sum
	f.lg.Info("native session written by cast: following it as its cast session",
		zap.String("path", path), zap.String("session", rec.SessionID))
	return st, nil
}

// read is what the file holds that may be new: only the appended lines
// (tail true) when the file grew, its kept prefix unchanged, and the
// driver parses a tail; else the whole file.
func (f *Follower) read(agent string, data []byte, st *fileState) (msgs []transcript.Message, tail bool, err error) {
	grew := st.Size > 0 && int64(len(data)) >= st.Size && hashOf(data[:st.Size]) == st.Hash
	if grew && int64(len(data)) == st.Size {
		return nil, true, nil
	}
	if tp, ok := agents.DriverAs[agents.TailParser](agent); ok && grew {
		msgs, err := tp.ParseTail(data[st.Size:], countLines(data[:st.Size]))
		return msgs, true, err
	}
	// The bytes read, not the file again: what the state records as read
	// (Size, Hash) is then exactly what was parsed, however fast it grows.
	msgs, err = readBytes(f.st, agent, data)
	return msgs, false, err
}

// origin is where one native session is: Key in the bookkeeping, Path
// as its origin says (its file, its agent's store, or the file a run is
// kept inside), and what its first batch tells of it: the folder it ran
// in and, for a subagent's run, what started it (the native session, or
// the cast session keeping it, and the parent's call).
type origin struct {
	Key, Path                       string
	Cwd                             string
	ParentNativeID, ParentSessionID string
	CallID                          string
}

func hashOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// countLines counts non-blank lines (TailParser's linesBefore).
func countLines(b []byte) int {
	n := 0
	for _, l := range bytes.Split(b, []byte{'\n'}) {
		if len(bytes.TrimSpace(l)) > 0 {
			n++
		}
	}
	return n
}
