package custody_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/cast-dev/cast/internal/agents/codecs"
	"github.com/cast-dev/cast/internal/custody"
	"github.com/cast-dev/cast/internal/fsutil"
)

// A CLI that refreshed on its own (its file changed on disk after the
// node supplied it) is reported: the record keeps the newer credential,
// refresh token and all, and the CLI's file goes back to the access token
// only. A rewrite that is not newer, or a file the node never wrote for
// that account, is not taken.
func TestSupplyReportsACLIRefresh(t *testing.T) {
	d := newDay(t, "claude", custodial)
	ctx := context.Background()
	n, err := custody.NewNode(custody.NodeConfig{Name: "n9", Dir: t.TempDir(), Now: d.clock}, d.v, codecs.Credential, nil, zaptest.NewLogger(t))
	must(t, err)
	path := filepath.Join(t.TempDir(), ".credentials.json")

	// A file already there that this node did not write (the user's own
	// login) is replaced, never reported.
	own := d.login()
	must(t, fsutil.WriteFileAtomic(path, own, 0o600))
	first, err := n.Supply(ctx, "claude", "A", path)
	must(t, err)
	if _, stored, _ := d.v.Get(ctx, "claude", "A"); stored.AccessID != first.AccessID {
		t.Fatal("a file the node never wrote for A was taken as A's")
	}

	// The CLI refreshes on its own with a refresh token it had.
	raw, _, err := d.v.Get(ctx, "claude", "A")
	must(t, err)
	cliFile := filepath.Join(t.TempDir(), ".credentials.json")
	must(t, fsutil.WriteFileAtomic(cliFile, raw, 0o600))
	d.mu.Lock()
	d.now = d.now.Add(time.Minute)
	d.mu.Unlock()
	must(t, (&cliRefresher{d: d, own: true}).Refresh(ctx, "claude", cliFile))
	refreshed, _ := os.ReadFile(cliFile)
	must(t, fsutil.WriteFileAtomic(path, refreshed, 0o600))
	got, err := n.Supply(ctx, "claude", "A", path)
	must(t, err)
	newer, _ := d.f.Parse(refreshed)
	if got.AccessID != newer.AccessID {
		t.Fatal("the CLI's newer credential was not reported")
	}
	stored, tok, _ := d.v.Get(ctx, "claude", "A")
	if string(stored) != string(refreshed) || !tok.HasRefresh {
		t.Fatal("the record does not hold the CLI's rotated login")
	}
	onDisk, _ := os.ReadFile(path)
	if ptok, _ := d.f.Parse(onDisk); ptok.HasRefresh || ptok.AccessID != newer.AccessID {
		t.Fatal("the CLI's file still holds a refresh token after the report")
	}

	// An older file written over it is not taken back.
	must(t, fsutil.WriteFileAtomic(path, raw, 0o600))
	got, err = n.Supply(ctx, "claude", "A", path)
	must(t, err)
	if got.AccessID != newer.AccessID {
		t.Fatal("an older credential went back into custody")
	}
	if len(d.fake.Revoked()) > 0 {
		t.Fatalf("revoked: %v", d.fake.Revoked())
	}
}

// A node that restarts after `cast account rm` finds the removed account's
// last login in its custody folder: the record does not take it back, and
// the node deletes its copy.
func TestReconcileDropsARemovedAccount(t *testing.T) {
	d := newDay(t, "codex", custodial)
	ctx := context.Background()
	dir := t.TempDir()
	n, err := custody.NewNode(custody.NodeConfig{Name: "n9", Dir: dir, Now: d.clock}, d.v, codecs.Credential, nil, zaptest.NewLogger(t))
	must(t, err)
	raw, _, err := d.v.Get(ctx, "codex", "A")
	must(t, err)
	left := filepath.Join(dir, "codex", "A", "auth.json")
	must(t, os.MkdirAll(filepath.Dir(left), 0o700))
	must(t, fsutil.WriteFileAtomic(left, raw, 0o600))
	must(t, d.v.Delete(ctx, "codex", "A"))
	must(t, n.Reconcile(ctx, "codex", "A"))
	if _, err := os.Stat(filepath.Dir(left)); !os.IsNotExist(err) {
		t.Fatal("the removed account's login is still in the custody folder")
	}
	if _, _, err := d.v.Get(ctx, "codex", "A"); err == nil {
		t.Fatal("the removed account came back into custody")
	}
}
