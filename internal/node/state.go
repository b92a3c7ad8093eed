package node

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/delivery"
	"github.com/cast-dev/cast/internal/statefile"
)

// owned is what the node remembers about a session it owns.
type owned struct {
	Token  int64  `json:"token"`
	Agent  string `json:"agent"`
	Model  string `json:"model,omitempty"`
	Effort string `json:"effort,omitempty"`
	// Account is the session's named credential set ("" = default).
	Account string `json:"account,omitempty"`
	// WorktreeBranch: turns run in a git worktree on this branch (Cwd
	// becomes the worktree once made; worktrees.go).
	WorktreeBranch string `json:"worktree_branch,omitempty"`
	Cwd            string `json:"cwd"`
	// Checkout is the folder the session's workspaces are taken from
	// (`cast workspace set --root` returns to it); "" means cwd's own.
	Checkout string `json:"checkout,omitempty"`
	// ReceivedSeq is the newest user message the node has been handed;
	// DeliveredSeq the newest one a turn is done with. A turn the agent did
	// not take moves DeliveredSeq past its prompt too (reported with an
	// undelivered notice), so it never rides along with later messages; a
	// parked turn (usage limit) keeps it for the next credential, and
	// FailedSeq stops a retry loop until a new message arrives.
	ReceivedSeq  int64 `json:"received_seq"`
	DeliveredSeq int64 `json:"delivered_seq"`
	FailedSeq    int64 `json:"failed_seq,omitempty"`
	// Killed: FailedSeq holds a turn whose CLI a signal from outside
	// ended (runner reason killed). The node's next start runs it again
	// (runKilledAgain): a service manager's stop signals the node and its
	// CLIs at once, and the user who starts the node again expects the
	// turn to run without sending another message.
	Killed bool `json:"killed,omitempty"`
	// ReceivedID is the client id of the user message at ReceivedSeq (""
	// when the cursor moved without one): a store restored from an older
	// snapshot holds another message there (storeBehind).
	ReceivedID string `json:"received_id,omitempty"`
	// Notice is a migration notice the agent has not been told yet (it is
	// stored after the messages held during the move, so no rebuild of the
	// history before them carries it); NoticeSeq is the newest one taken.
	Notice    string `json:"notice,omitempty"`
	NoticeSeq int64  `json:"notice_seq,omitempty"`
	// Native are the agent-native sessions (caches of the neutral copy).
	Native map[string]*nativeSession `json:"native,omitempty"`
	// Former are native sessions Native held once and a turn replaced
	// (a rebuild, a new folder), newest last, at most maxFormer: cast wrote
	// them, so adoption must not take their files for sessions the user
	// ran (change records them; remove releases them with Native's).
	Former []releasedNative `json:"former,omitempty"`
	// Parked: the last turn hit a usage limit; a new fleet credential runs
	// it again.
	Parked bool `json:"parked,omitempty"`
	// RunningPGID is the process group of a turn in flight: the CLI
	// outlives a node killed with -9, and a restarted node must stop it
	// before it runs the turn again.
	RunningPGID int `json:"running_pgid,omitempty"`
	// TurnToken marks the CLI of the turn in flight (CAST_TURN in its
	// environment); it is recorded before the CLI starts, so a node killed
	// before RunningPGID was written still finds and stops it.
	TurnToken string `json:"turn_token,omitempty"`
	// Report is the state the last turn ended in; Report.Pending until the
	// control plane recorded it (report.go).
	Report *turnReport `json:"report,omitempty"`
}

// nativeSession is one agent's native copy of the session.
type nativeSession struct {
	ID        string `json:"id"`
	Path      string `json:"path,omitempty"`
	KnownUpto int64  `json:"known_upto_seq"` // every seq up to here is in it, except Missing
	// Missing are seq ranges at or below KnownUpto it does not hold: rows
	// others stored while its turn ran (a message sent meanwhile, which this
	// agent never answered), between the turn's own rows.
	Missing []delivery.Range `json:"missing,omitempty"`
	// Stale: the CLI may hold a refused prompt; rebuild before resuming.
	Stale bool `json:"stale,omitempty"`
	// Account is the fleet account its last turn ran on ("" for none).
	// For an agent whose native sessions are bound to the account that
	// wrote them (agents.Capabilities.NativeAccountBound), a turn on
	// another account rebuilds it first (boundElsewhere).
	Account string `json:"account,omitempty"`
}

// holdsUpTo reports whether ns holds every row up to seq (none missing).
func (ns *nativeSession) holdsUpTo(seq int64) bool {
	if ns == nil || ns.KnownUpto < seq {
		return false
	}
	for _, m := range ns.Missing {
		if m.From <= seq {
			return false
		}
	}
	return true
}

// holds reports whether ns holds the row with seq.
func (ns *nativeSession) holds(seq int64) bool {
	if ns == nil {
		return false
	}
	in := delivery.Input{Native: &delivery.Row{NativeID: ns.ID, KnownUpto: ns.KnownUpto}, Missing: ns.Missing}
	return in.Holds(seq)
}

// boundElsewhere says whether ns holds what only another fleet account
// than account can send back, so the turn must rebuild it.
func (ns *nativeSession) boundElsewhere(agent, account string) bool {
	a, _ := agents.Lookup(agent)
	return ns != nil && a.Caps.NativeAccountBound && ns.Account != account
}

// state is the node's bookkeeping, on disk after every change so a
// restarted node resumes without redelivering: DataDir/state.json and its
// journal (internal/statefile), so a change to one session writes that
// session's record, not every session's.
type state struct {
	file *statefile.File

	mu sync.Mutex
	// unrecorded: the last write failed (a full disk), so memory is ahead
	// of the file until a write succeeds; no turn starts meanwhile.
	unrecorded bool
	// recovered: a write succeeded after one failed, and the turns held
	// meanwhile have not been woken yet. Any writer's success sets it, not
	// only recordAgain's, so held sessions are never left asleep.
	recovered bool
	Sessions  map[string]*owned `json:"sessions"`
	// Fleet is, per agent, the fleet account its shared credential store
	// holds (see credentials.go).
	Fleet map[string]fleetCred `json:"fleet,omitempty"`
	// Worktrees are the git worktrees this node made, by path: only these
	// are listed and may be removed.
	Worktrees map[string]worktreeRec `json:"worktrees,omitempty"`
	// Released are the native sessions of the sessions this node let go
	// of (moved to another node, archived, dropped), by agent and native
	// id: cast wrote them, and the files stay behind, so adoption must
	// never take one for a session the user ran (it would list a copy of
	// the session's history as a new session). An entry goes with its
	// file (pruneReleased).
	Released map[string]releasedNative `json:"released,omitempty"`
}

// releasedNative is a native session of a session the node let go of.
type releasedNative struct {
	Agent   string `json:"agent"`
	ID      string `json:"id,omitempty"`
	Path    string `json:"path,omitempty"`
	Session string `json:"session"`
	At      int64  `json:"at"` // unix seconds of the release: the oldest go first past maxReleased
}

// maxFormer bounds a session's replaced native sessions kept (Former):
// each turn that rebuilds adds one.
const maxFormer = 64

// natives copies o.Native, for keepReplaced after a change.
func (o *owned) natives() map[string]nativeSession {
	out := make(map[string]nativeSession, len(o.Native))
	for agent, ns := range o.Native {
		if ns != nil {
			out[agent] = *ns
		}
	}
	return out
}

// keepReplaced adds to o.Former each native session of before (what
// o.Native held) that o.Native no longer holds.
func (o *owned) keepReplaced(id string, before map[string]nativeSession) {
	for agent, was := range before {
		if now := o.Native[agent]; (was.ID == "" && was.Path == "") || now != nil && now.ID == was.ID && now.Path == was.Path {
			continue
		}
		o.Former = append(o.Former, releasedNative{Agent: agent, ID: was.ID, Path: was.Path, Session: id, At: time.Now().Unix()})
	}
	if len(o.Former) > maxFormer {
		o.Former = slices.Delete(o.Former, 0, len(o.Former)-maxFormer)
	}
}

// maxReleased bounds the released native sessions kept: a store agent's
// (no file of its own to see gone) would otherwise pile up.
const maxReleased = 4096

// worktreeRec is a git worktree cast made.
type worktreeRec struct {
	Path     string `json:"path"`
	Branch   string `json:"branch"`
	Checkout string `json:"checkout"` // the main checkout it was made from
}

// addWorktree records a worktree the node made.
func (st *state) addWorktree(w worktreeRec) error {
	return st.update(func(map[string]*owned) {
		if st.Worktrees == nil {
			st.Worktrees = map[string]worktreeRec{}
		}
		st.Worktrees[w.Path] = w
	})
}

// dropWorktree forgets a removed worktree.
func (st *state) dropWorktree(path string) error {
	return st.update(func(map[string]*owned) { delete(st.Worktrees, path) })
}

// worktrees lists the worktrees the node made and, per path, the sessions
// whose cwd is in it.
func (st *state) worktrees() ([]worktreeRec, map[string][]string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	list := make([]worktreeRec, 0, len(st.Worktrees))
	in := map[string][]string{}
	for _, w := range st.Worktrees {
		list = append(list, w)
		for id, o := range st.Sessions {
			if o.Cwd != "" && within(w.Path, filepath.Clean(o.Cwd)) {
				in[w.Path] = append(in[w.Path], id)
			}
		}
	}
	return list, in
}

// fleetCred is the fleet account written into an agent's shared store.
type fleetCred struct {
	Account string `json:"account"`
	Epoch   int64  `json:"epoch"`
}

// fleet returns what the agent's shared credential store holds.
func (st *state) fleet(agent string) fleetCred {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.Fleet[agent]
}

// setFleet records what the agent's store holds and applies fn to the
// sessions in the same write.
func (st *state) setFleet(agent string, fc fleetCred, fn func(map[string]*owned)) error {
	return st.update(func(m map[string]*owned) {
		if st.Fleet == nil {
			st.Fleet = map[string]fleetCred{}
		}
		st.Fleet[agent] = fc
		fn(m)
	})
}

func loadState(dir string) (*state, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	st := &state{Sessions: map[string]*owned{}}
	f, doc, err := statefile.Open(filepath.Join(dir, "state.json"), stateRecords)
	if err != nil {
		return nil, err
	}
	st.file = f
	if doc != nil {
		if err := json.Unmarshal(doc, st); err != nil {
			return nil, err
		}
	}
	if st.Sessions == nil {
		st.Sessions = map[string]*owned{}
	}
	return st, nil
}

// stateRecords is the state's field whose members the journal holds.
const stateRecords = "sessions"

// update applies fn under the lock and writes the whole state: for
// changes beyond one session (the fleet's credentials, worktrees, a
// workspace move of several sessions).
func (st *state) update(fn func(map[string]*owned)) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	fn(st.Sessions)
	return st.persist()
}

// session applies fn to the session's record, if the node has it, and
// records what changed: nothing when nothing did.
func (st *state) session(id string, fn func(*owned)) error {
	return st.change(id, false, fn)
}

// assign is session for a record the node may not have yet (made empty).
func (st *state) assign(id string, fn func(*owned)) error {
	return st.change(id, true, fn)
}

// change is session and assign: it compares the record's encoding before
// and after fn, so a caller never has to say whether it changed anything.
func (st *state) change(id string, create bool, fn func(*owned)) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	o := st.Sessions[id]
	var before []byte
	if o == nil {
		if !create {
			return nil
		}
		o = &owned{}
		st.Sessions[id] = o
	} else if b, err := json.Marshal(o); err == nil {
		before = b
	}
	natives := o.natives()
	fn(o)
	o.keepReplaced(id, natives)
	after, err := json.Marshal(o)
	if err != nil {
		return err
	}
	if bytes.Equal(before, after) && !st.unrecorded {
		return nil // a resync's assignment of a session as it was
	}
	return st.record(id, after)
}

// remove forgets a session, keeping its native sessions as Released: a
// journal line for each released native session (and each pruned), then
// the session's, so a release costs what it changed however many
// sessions the node owns. A crash between them leaves the session owned
// with its native sessions already released; the control plane releases
// it again.
func (st *state) remove(id string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	o, ok := st.Sessions[id]
	if !ok && !st.unrecorded {
		return nil
	}
	delete(st.Sessions, id)
	if o == nil || len(o.Native) == 0 && len(o.Former) == 0 {
		return st.record(id, nil)
	}
	if st.Released == nil {
		st.Released = map[string]releasedNative{}
	}
	now := time.Now().Unix()
	changed := map[string]*releasedNative{}
	release := append([]releasedNative(nil), o.Former...)
	for agent, ns := range o.Native {
		if ns != nil {
			release = append(release, releasedNative{Agent: agent, ID: ns.ID, Path: ns.Path})
		}
	}
	for _, r := range release {
		if r.ID == "" && r.Path == "" {
			continue
		}
		r.Session, r.At = id, now
		st.Released[r.Agent+"#"+cmp.Or(r.ID, r.Path)] = r
		changed[r.Agent+"#"+cmp.Or(r.ID, r.Path)] = &r
	}
	for _, k := range st.pruneReleased() {
		changed[k] = nil
	}
	if st.unrecorded || st.file.Due() {
		return st.persist()
	}
	for k, r := range changed {
		var value []byte
		if r != nil {
			value, _ = json.Marshal(r)
		}
		if err := st.file.PutIn(releasedRecords, k, value); err != nil {
			st.recorded(err)
			return err
		}
	}
	return st.record(id, nil)
}

// releasedRecords is the state's field of the released native sessions,
// journaled beside the sessions (remove).
const releasedRecords = "released"

// pruneReleased drops the released native sessions whose files are gone
// (the user deleted them; nothing is left to adopt), then the oldest past
// maxReleased, and returns their keys; st.mu is held.
func (st *state) pruneReleased() []string {
	var dropped []string
	for k, r := range st.Released {
		if _, err := os.Stat(r.Path); r.Path != "" && errors.Is(err, fs.ErrNotExist) {
			delete(st.Released, k)
			dropped = append(dropped, k)
		}
	}
	if len(st.Released) <= maxReleased {
		return dropped
	}
	keys := slices.SortedFunc(maps.Keys(st.Released), func(a, b string) int {
		return cmp.Compare(st.Released[a].At, st.Released[b].At)
	})
	for _, k := range keys[:len(keys)-maxReleased] {
		delete(st.Released, k)
		dropped = append(dropped, k)
	}
	return dropped
}

// record writes one session's new record (nil: removed) to the journal,
// or the whole state when a snapshot is due or the last write failed;
// st.mu is held.
func (st *state) record(id string, value []byte) error {
	if st.unrecorded || st.file.Due() {
		return st.persist()
	}
	err := st.file.Put(id, value)
	st.recorded(err)
	return err
}

// persist writes the whole state as the snapshot (a failed write leaves
// the last good one); st.mu is held.
func (st *state) persist() error {
	b, err := json.Marshal(st)
	if err == nil {
		err = st.file.Snapshot(b)
	}
	st.recorded(err)
	return err
}

// recorded notes a write's outcome: memory is ahead of the disk after a
// failed one, and a success after a failure wakes the turns held meanwhile.
func (st *state) recorded(err error) {
	if err == nil && st.unrecorded {
		st.recovered = true
	}
	st.unrecorded = err != nil
}

// behind reports whether memory is ahead of the state file.
func (st *state) behind() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.unrecorded
}

// catchUp writes the state file again if the last write failed; true once
// per recovery, when a write (this one or any other since) succeeded after
// a failed one, so the caller wakes the turns held meanwhile.
func (st *state) catchUp() (bool, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.unrecorded {
		if err := st.persist(); err != nil {
			return false, err
		}
	}
	now := st.recovered
	st.recovered = false
	return now, nil
}

// get returns a copy of a session's record.
func (st *state) get(id string) (owned, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	o, ok := st.Sessions[id]
	if !ok {
		return owned{}, false
	}
	return *o, true
}

// ids lists the sessions the node believes it owns.
func (st *state) ids() []string {
	st.mu.Lock()
	defer st.mu.Unlock()
	out := make([]string, 0, len(st.Sessions))
	for id := range st.Sessions {
		out = append(out, id)
	}
	return out
}

// sessionOfNative is the session this node owns whose native session of
// agent is nativeID ("" for none).
func (st *state) sessionOfNative(agent, nativeID string) string {
	st.mu.Lock()
	defer st.mu.Unlock()
	for id, o := range st.Sessions {
		if ns := o.Native[agent]; ns != nil && nativeID != "" && ns.ID == nativeID {
			return id
		}
	}
	return ""
}

// holdsNative says whether path (or, for a store agent, nativeID) is the
// native session of agent for a session this node owns, or owned before
// it let it go (Released); "" matches none.
func (st *state) holdsNative(agent, path, nativeID string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	is := func(p, id string) bool { return (path != "" && p == path) || (nativeID != "" && id == nativeID) }
	for _, o := range st.Sessions {
		if ns := o.Native[agent]; ns != nil && is(ns.Path, ns.ID) {
			return true
		}
		for _, f := range o.Former {
			if f.Agent == agent && is(f.Path, f.ID) {
				return true
			}
		}
	}
	for _, r := range st.Released {
		if r.Agent == agent && is(r.Path, r.ID) {
			return true
		}
	}
	return false
}
