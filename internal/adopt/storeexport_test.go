package adopt_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap"

	"github.com/cast-dev/cast/internal/adopt"
	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/agents/opencode"
	"github.com/cast-dev/cast/internal/exportlog"
	"github.com/cast-dev/cast/internal/transcript"
)

// A stored session `cast export --agent opencode` wrote into the node's
// own store (the export log names it by agent and native id; its path is
// the database every session shares) is that cast session's, not a new
// one holding a copy of its history. The listing and the export are
// stand-ins (the environment): what is under test is adoption's reading of
// them.
func TestFollowStoreKnowsSessionsCastExported(t *testing.T) {
	const id = "ses_dd5cb6e7affeOTF71Xuz2X9heu" // the export's
	home := t.TempDir()
	db := filepath.Join(home, "opencode", "opencode.db")
	if err := os.MkdirAll(filepath.Dir(db), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	export, err := os.ReadFile("../agents/opencode/testdata/examples/opencode_handwritten_import.json")
	if err != nil {
		t.Fatal(err)
	}
	s := &sink{}
	cast := castFiles{runs: map[string]bool{}, busy: map[string]bool{}, wrote: map[string]exportlog.Record{},
		exported: map[string]exportlog.Record{storeAgent + "#" + id: {NativeID: id, Path: db, SessionID: "cast-exported"}}}
	f, err := adopt.New([]adopt.Source{{Agent: storeAgent, Home: home}}, t.TempDir(), s, cast, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	adopt.WrapStoreLister(f, func(sl agents.StoreLister) agents.StoreLister {
		return fixedLister{StoreLister: sl, list: []agents.StoredSession{{ID: id, Cwd: home, Version: "1"}}, export: export}
	})
	if _, err := f.Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, b := range s.batches {
		if b.SessionID == "" {
			t.Fatalf("the session cast exported was adopted as a new one (%d messages)", len(b.Messages))
		}
	}
}

// fixedLister lists list and exports export (an export document)
// whatever the store holds.
type fixedLister struct {
	agents.StoreLister
	list   []agents.StoredSession
	export []byte
}

func (l fixedLister) Export(context.Context, string, []string, agents.Target, string) ([]transcript.Message, error) {
	p, err := opencode.Parse(bytes.NewReader(l.export))
	return p.Messages, err
}

func (l fixedLister) StoredSessions(context.Context, string, []string, string) ([]agents.StoredSession, error) {
	return l.list, nil
}
