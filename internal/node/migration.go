package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/fsutil"
	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
	"github.com/cast-dev/cast/internal/tick"
	"github.com/cast-dev/cast/internal/treemove"
)

// The node's part in migrations: export a session's work tree (source),
// check it out at this node's path for it (destination), give up a session
// it lost (release), and stop its agents by itself when cut off from the
// control plane for longer than its lease minus a margin (self-fencing:
// etcd can fence writes, not a running process).

const uploadChunk = 256 << 10

// migrationJobs dedupes relayed migration commands: the control plane
// resends an unanswered one, and a slow export must not run twice at once.
type migrationJobs struct {
	mu      sync.Mutex
	running map[string]bool
	paths   map[string]*pathLock // one import per checkout at a time
	notes   sync.Mutex           // the --clean-source notes' read-modify-writes (cleansource.go)
}

// pathLock is one checkout's import lock and how many imports hold or
// wait for it: the entry goes with the last, so the map does not keep
// every checkout ever imported into.
type pathLock struct {
	sync.Mutex
	users int
}

// lockPath serializes imports into one checkout (sessions sharing it move
// in parallel; the first lays it down, the rest find it in place).
func (j *migrationJobs) lockPath(p string) func() {
	j.mu.Lock()
	if j.paths == nil {
		j.paths = map[string]*pathLock{}
	}
	l := j.paths[p]
	if l == nil {
		l = &pathLock{}
		j.paths[p] = l
	}
	l.users++
	j.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		j.mu.Lock()
		if l.users--; l.users == 0 {
			delete(j.paths, p)
		}
		j.mu.Unlock()
	}
}

func (j *migrationJobs) start(key string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.running == nil {
		j.running = map[string]bool{}
	}
	if j.running[key] {
		return false
	}
	j.running[key] = true
	return true
}

func (j *migrationJobs) done(key string) {
	j.mu.Lock()
	delete(j.running, key)
	j.mu.Unlock()
}

// migrationDir holds the bundles and markers of this node's migrations.
// The folder keeps its old name, "moves", so a node upgraded mid-migration
// finds what it left there.
func (a *Daemon) migrationDir() string { return filepath.Join(a.cfg.DataDir, "moves") }

// staleMigrationFile is the age past which the sweep drops what no
// assignment settles: done markers of imports whose move rolled back (the
// session is never assigned here) and bundles a crash left. A marker only
// matters while its move runs (once it ended, a resent import's download
// is refused anyway), and a day is far past any work tree step
// (migrate's WorkTreeTimeout, minutes a try).
const staleMigrationFile = 24 * time.Hour

// importedSuffix ends the done marker of an import of session s.
func importedSuffix(s string) string { return "-" + s + ".imported" }

// importMarkers is the node's index of its imports' done markers (the
// `.imported` files in the migration folder): the folder is read once,
// then the index follows the node's own writes and removals (no other
// process writes its data dir, which the node locks). An assignment
// drops its session's markers, and a resync assigns every session the
// node owns: each read the whole folder, thousands of reads a resync.
type importMarkers struct {
	mu    sync.Mutex
	names map[string]bool // nil until the folder is read
	// readDir reads the migration folder (os.ReadDir; a test counts reads).
	readDir func(string) ([]os.DirEntry, error)
}

// load reads dir into the index unless it holds it already (m.mu held).
// A folder that does not exist yet holds no marker; one that cannot be
// read is read again next time.
func (m *importMarkers) load(dir string) {
	if m.names != nil {
		return
	}
	read := m.readDir
	if read == nil {
		read = os.ReadDir
	}
	ents, err := read(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return
	}
	m.names = map[string]bool{}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".imported") {
			m.names[e.Name()] = true
		}
	}
}

// add records marker name, written in dir.
func (m *importMarkers) add(dir, name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.load(dir)
	if m.names != nil {
		m.names[name] = true
	}
}

// forget records that marker name is gone.
func (m *importMarkers) forget(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.names, name)
}

// take removes from the index, and returns, the markers in dir drop
// picks.
func (m *importMarkers) take(dir string, drop func(name string) bool) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.load(dir)
	var out []string
	for name := range m.names {
		if drop(name) {
			delete(m.names, name)
			out = append(out, name)
		}
	}
	return out
}

// dropImportedMarkers drops the done markers of s's imports once it is
// assigned here fenced by none of their migrations: those moves committed
// (or ended), so no resent import of theirs can still be taken.
func (a *Daemon) dropImportedMarkers(s *castv1.Session) {
	dir := a.migrationDir()
	for _, name := range a.markers.take(dir, func(name string) bool {
		return strings.HasSuffix(name, importedSuffix(s.Id)) && (s.FencedBy == "" || name != s.FencedBy+importedSuffix(s.Id))
	}) {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			a.markers.add(dir, name) // still there: the next assignment tries again
			a.lg.Warn("drop import done marker failed", zap.String("session", s.Id), zap.String("marker", name), zap.Error(err))
		}
	}
}

// sweepMigrationDir drops done markers and bundles older than
// staleMigrationFile, at the start and then hourly.
func (a *Daemon) sweepMigrationDir(ctx context.Context) {
	tick.Loop{Every: time.Hour, First: true}.Run(ctx, func() bool {
		ents, err := os.ReadDir(a.migrationDir())
		if err != nil {
			return true
		}
		for _, e := range ents {
			name := e.Name()
			if !strings.HasSuffix(name, ".imported") && !strings.HasSuffix(name, ".bundle") {
				continue
			}
			if fi, err := e.Info(); err != nil || time.Since(fi.ModTime()) < staleMigrationFile {
				continue
			}
			if err := os.Remove(filepath.Join(a.migrationDir(), name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				a.lg.Warn("drop stale migration file failed", zap.String("file", name), zap.Error(err))
				continue
			}
			a.markers.forget(name)
		}
		return true
	})
}

// exportWorkTree bundles the session's checkout and uploads it; a failure
// is reported so the migration rolls back at once with the reason.
func (a *Daemon) exportWorkTree(ctx context.Context, c *castv1.ExportWorkTree) {
	a.migrationJob("export", c.MigrationId, c.SessionId, func(lg *zap.Logger) {
		err := a.uploadWorkTree(ctx, c)
		if err == nil {
			a.failpoint("node.after-export")
			lg.Info("work tree exported", zap.String("cwd", c.Cwd))
			return
		}
		lg.Warn("work tree export failed", zap.Error(err))
		if _, rerr := a.cli.Nodes.ReportWorkTree(ctx, &castv1.ReportWorkTreeRequest{MigrationId: c.MigrationId, SessionId: c.SessionId,
			Node: a.cfg.Name, Phase: "export", Error: clipReason(err.Error())}); rerr != nil {
			lg.Warn("report export failure failed", zap.Error(rerr))
		}
	})
}

// migrationJob runs fn, with a logger naming the migration and the
// session, unless the same command runs already (the control plane resent
// it while the first was still at work).
func (a *Daemon) migrationJob(phase, migration, session string, fn func(lg *zap.Logger)) {
	key := phase + "/" + migration + "/" + session
	if !a.migrations.start(key) {
		return
	}
	defer a.migrations.done(key)
	fn(a.lg.With(zap.String("migration", migration), zap.String("session", session)))
}

func (a *Daemon) uploadWorkTree(ctx context.Context, c *castv1.ExportWorkTree) error {
	if a.exportStored(c) {
		// A resend that crossed the first export's upload: the control
		// plane keeps that one, so bundling the (maybe changed) checkout
		// again would only make the note disagree with what moves.
		a.lg.Info("work tree export resent after its upload was stored; kept", zap.String("migration", c.MigrationId), zap.String("session", c.SessionId))
		return nil
	}
	if err := os.MkdirAll(a.migrationDir(), 0o700); err != nil {
		return err
	}
	bundle := filepath.Join(a.migrationDir(), c.MigrationId+"-"+c.SessionId+".bundle")
	defer os.Remove(bundle)
	if err := treemove.Check(ctx, c.Cwd); err != nil {
		return err
	}
	man, err := treemove.Export(ctx, c.Cwd, bundle)
	if err != nil {
		return err
	}
	if err := a.noteExport(c, man); err != nil {
		return err
	}
	size, err := a.sendWorkTree(ctx, c, bundle, man)
	if err != nil {
		return err
	}
	return a.noteStored(c, size)
}

// sendWorkTree uploads the bundle and its manifest; it returns the bytes
// the control plane stored (none when it kept an earlier upload).
func (a *Daemon) sendWorkTree(ctx context.Context, c *castv1.ExportWorkTree, bundle string, man treemove.Manifest) (int64, error) {
	manJSON, err := json.Marshal(man)
	if err != nil {
		return 0, err
	}
	f, err := os.Open(bundle)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	stream, err := a.cli.Nodes.UploadWorkTree(ctx)
	if err != nil {
		return 0, err
	}
	buf := make([]byte, uploadChunk)
	req := &castv1.UploadWorkTreeRequest{MigrationId: c.MigrationId, SessionId: c.SessionId, Node: a.cfg.Name}
	for {
		n, rerr := io.ReadFull(f, buf)
		if n > 0 {
			req.Chunk = buf[:n]
			if err := stream.Send(req); errors.Is(err, io.EOF) {
				// The control plane answered before the end: an export
				// already done for this migration keeps its first upload
				// (a resent command), or a refusal. Its answer says which.
				resp, err := stream.CloseAndRecv()
				return resp.GetSize(), err
			} else if err != nil {
				return 0, fmt.Errorf("upload work tree: %w", err)
			}
			req = &castv1.UploadWorkTreeRequest{}
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			return 0, rerr
		}
	}
	req.ManifestJson = string(manJSON)
	if err := stream.Send(req); err != nil {
		return 0, fmt.Errorf("upload work tree: %w", err)
	}
	resp, err := stream.CloseAndRecv()
	return resp.GetSize(), err
}

// importWorkTree checks the relayed work tree out at this node's path for
// the session's cwd and reports the outcome (the path, or why not).
func (a *Daemon) importWorkTree(ctx context.Context, c *castv1.ImportWorkTree) {
	a.migrationJob("import", c.MigrationId, c.SessionId, func(lg *zap.Logger) {
		dest := a.cfg.PathMap.Apply(c.SourceCwd)
		err := a.checkoutWorkTree(ctx, c, dest)
		if err == nil {
			a.failpoint("node.after-import")
		}
		rep := &castv1.ReportWorkTreeRequest{MigrationId: c.MigrationId, SessionId: c.SessionId, Node: a.cfg.Name, Phase: "import", Cwd: dest}
		if err != nil {
			lg.Warn("work tree import failed", zap.String("cwd", dest), zap.Error(err))
			rep.Error = clipReason(err.Error())
		} else {
			lg.Info("work tree imported", zap.String("cwd", dest))
		}
		// The report is the answer: gRPC retries it through a blip (the
		// client's service config).
		if _, err = a.cli.Nodes.ReportWorkTree(ctx, rep); err != nil && ctx.Err() == nil {
			lg.Warn("report import outcome failed", zap.Error(err))
		}
	})
}

// checkoutWorkTree is the import itself. A done marker makes a resent
// command (the control plane restarted before the report landed) answer
// again instead of importing into the now-changed directory.
func (a *Daemon) checkoutWorkTree(ctx context.Context, c *castv1.ImportWorkTree, dest string) error {
	if c.Skip {
		if dest == "" {
			return nil
		}
		if fi, err := os.Stat(dest); err != nil || !fi.IsDir() {
			return fmt.Errorf("no checkout at %s on node %s (the work tree was not moved: --skip-worktree); map the path with node --map-path FROM=TO", dest, a.cfg.Name)
		}
		return nil
	}
	if err := os.MkdirAll(a.migrationDir(), 0o700); err != nil {
		return err
	}
	marker := filepath.Join(a.migrationDir(), c.MigrationId+importedSuffix(c.SessionId))
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	bundle := filepath.Join(a.migrationDir(), c.MigrationId+"-"+c.SessionId+".in.bundle")
	defer os.Remove(bundle)
	man, err := a.downloadWorkTree(ctx, c, bundle)
	if err != nil {
		return err
	}
	// A session in a subdirectory of its checkout: the whole work tree
	// travels, to the checkout that holds dest.
	top, err := man.Top(dest)
	if err != nil {
		return err
	}
	defer a.migrations.lockPath(top)()
	if err := treemove.Import(ctx, bundle, top, man); err != nil {
		return err
	}
	return a.writeImportMarker(marker, dest)
}

// writeImportMarker writes an import's done marker. Import synced the tree
// before it returned, so the synced marker never outlives part of it across
// a power loss; a marker lost all the same only costs a second Import, a
// no-op over the same state (treemove's alreadyThere).
func (a *Daemon) writeImportMarker(marker, dest string) error {
	if err := fsutil.WriteFileAtomic(marker, []byte(dest), 0o600); err != nil {
		return err
	}
	a.markers.add(a.migrationDir(), filepath.Base(marker))
	return nil
}

func (a *Daemon) downloadWorkTree(ctx context.Context, c *castv1.ImportWorkTree, path string) (treemove.Manifest, error) {
	var man treemove.Manifest
	stream, err := a.cli.Nodes.DownloadWorkTree(ctx, &castv1.DownloadWorkTreeRequest{MigrationId: c.MigrationId, SessionId: c.SessionId, Node: a.cfg.Name})
	if err != nil {
		return man, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return man, err
	}
	defer f.Close()
	gotManifest := false
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return man, fmt.Errorf("download work tree: %w", err)
		}
		if resp.ManifestJson != "" {
			if err := json.Unmarshal([]byte(resp.ManifestJson), &man); err != nil {
				return man, fmt.Errorf("work tree manifest: %w", err)
			}
			gotManifest = true
		}
		if _, err := f.Write(resp.Chunk); err != nil {
			return man, err
		}
	}
	if !gotManifest {
		return man, errors.New("the work tree download carried no manifest")
	}
	return man, f.Sync()
}

// release gives up a session another node owns now: its turn (if any) is
// stopped without marking the prompt delivered, and its bookkeeping goes.
func (a *Daemon) release(sessionID, owner string) {
	a.lg.Info("session released: it moved", zap.String("session", sessionID), zap.String("owner", owner))
	if !a.workers.release(sessionID) {
		a.forget(sessionID)
	}
	go a.cleanMoved(a.runCtx, sessionID, owner)
}

// cutOff reports whether the control plane's stream has been silent for
// longer than the lease minus a margin (¼ of it), and for how long. Until
// the stream is back (and has re-assigned the sessions) no turn starts,
// even if single calls get through again.
func (a *Daemon) cutOff() (time.Duration, bool) {
	ttl, last := time.Duration(a.leaseTTL.Load()), a.lastContact.Load()
	if ttl <= 0 || last == 0 {
		return 0, false
	}
	silent := time.Since(time.Unix(0, last))
	return silent, silent >= ttl-ttl/4
}

// selfFence stops every running turn when the control plane has not been
// heard from for longer than the lease minus a margin: by the time the
// lease lapses and a migration may force the session elsewhere, no agent of
// it runs here. Turns start again only once reconnected (a turn start is a
// fenced write that needs the control plane anyway).
func (a *Daemon) selfFence(ctx context.Context) {
	tick.Every(ctx, 250*time.Millisecond, func() bool {
		if silent, cut := a.cutOff(); cut {
			if n := a.workers.abandonAll(); n > 0 {
				a.lg.Warn("cut off from the control plane past the lease margin; stopped running agents",
					zap.Int("turns", n), zap.Duration("silent_for", silent))
			}
		}
		return true
	})
}

func (a *Daemon) failpoint(name string) {
	if a.cfg.Failpoint != nil {
		a.cfg.Failpoint(name)
	}
}
