package opencode

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/agenttest"
)

// The store's stamp holds across listings and moves with a write, even one
// that leaves the WAL its size; a store not made yet, or written within
// the racy window, has none. The listing read from the database is the
// one `opencode db` gives for the same query.
func TestStoreStampMovesOnlyWithAWrite(t *testing.T) {
	o := newOpenCode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	d := Driver{}
	write := func(sessionID string) {
		t.Helper()
		tg := agents.Target{Home: o.home, Cwd: o.cwd, SessionID: sessionID, Model: agenttest.FakeProvider + "/" + agenttest.FakeModel}
		if _, err := (Writer{Loader: o.loader}).Write(tg, conversation()); err != nil {
			t.Fatal(err)
		}
	}
	list := func(want int) {
		t.Helper()
		got, err := d.StoredSessions(ctx, o.loader.Bin, o.env, o.home)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != want {
			t.Fatalf("listed %d sessions, want %d", len(got), want)
		}
	}
	if s := d.StoreStamp(o.home); s != "" {
		t.Errorf("no store yet: stamp %q", s)
	}
	write("ses-stamp-1")
	if s := d.StoreStamp(o.home); s != "" {
		t.Errorf("store written just now: stamp %q", s)
	}
	agenttest.Age(t, filepath.Dir(DBPath(o.home)))
	first := d.StoreStamp(o.home)
	if first == "" {
		t.Fatal("no stamp for a store written a minute ago")
	}
	list(1)
	if s := d.StoreStamp(o.home); s != first {
		t.Errorf("a listing moved the stamp: %q, then %q", first, s)
	}
	list(1)
	if s := d.StoreStamp(o.home); s != first {
		t.Errorf("a second listing moved the stamp: %q, then %q", first, s)
	}
	write("ses-stamp-2")
	agenttest.Age(t, filepath.Dir(DBPath(o.home)))
	second := d.StoreStamp(o.home)
	if second == "" || second == first {
		t.Errorf("a write left the stamp %q (was %q)", second, first)
	}
	list(2)
	if s := d.StoreStamp(o.home); s != second {
		t.Errorf("a listing after a write moved the stamp: %q, then %q", second, s)
	}
	got, err := StoreSessions(ctx, o.home)
	if err != nil {
		t.Fatal(err)
	}
	if cli := cliSessions(t, ctx, o.loader, o.home); !reflect.DeepEqual(got, cli) {
		t.Errorf("read from the database:\n%+v\nopencode db:\n%+v", got, cli)
	}
}

// cliSessions lists the store under home through `opencode db`, as the
// node did before it read the database itself.
func cliSessions(t *testing.T, ctx context.Context, l Loader, home string) []agents.StoredSession {
	t.Helper()
	out, err := l.run(ctx, agents.Target{Home: home, Cwd: home}, "db", sessionsQuery, "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		ID        string `json:"id"`
		Directory string `json:"directory"`
		ParentID  string `json:"parent_id"`
		Version   string `json:"version"`
	}
	if i := strings.IndexByte(out, '['); i >= 0 {
		out = out[i:]
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("opencode db: %v: %s", err, out)
	}
	var list []agents.StoredSession
	for _, r := range rows {
		list = append(list, agents.StoredSession{ID: r.ID, Cwd: r.Directory, ParentID: r.ParentID, Version: r.Version})
	}
	return list
}

// The stamp is "" wherever the files cannot tell a write apart.
func TestStoreStampCannotTell(t *testing.T) {
	old := time.Now().Add(-time.Minute)
	for _, c := range []struct {
		name  string
		files map[string]time.Time // under the store's folder: mtime
		stamp bool
	}{
		{"no store", nil, false},
		{"no WAL", map[string]time.Time{"opencode.db": old}, false},
		{"WAL written just now", map[string]time.Time{"opencode.db": old, "opencode.db-wal": time.Now()}, false},
		{"WAL written in the future", map[string]time.Time{"opencode.db": old, "opencode.db-wal": time.Now().Add(time.Hour)}, false},
		{"WAL written a minute ago", map[string]time.Time{"opencode.db": old, "opencode.db-wal": old}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			home := t.TempDir()
			for name, mt := range c.files {
				p := filepath.Join(filepath.Dir(DBPath(home)), name)
				if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Chtimes(p, mt, mt); err != nil {
					t.Fatal(err)
				}
			}
			if got := (Driver{}).StoreStamp(home); (got != "") != c.stamp {
				t.Errorf("stamp %q, want one: %v", got, c.stamp)
			}
		})
	}
}
