package codex

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/agents"
)

// Both app-server routes put the whole conversation in front of the model
// on the next turn, driven through the real `codex app-server`.
func TestE2EAppServerImport(t *testing.T) {
	tests := []struct {
		route     Route
		keepsID   bool // the thread keeps cast's id
		uiTurns   bool // thread/read shows the imported turns
		newPrompt string
	}{
		{route: RouteResumePath, keepsID: true, uiTurns: true, newPrompt: "APP-NEW-A: what did we do?"},
		{route: RouteInjectItems, newPrompt: "APP-NEW-D: what did we do?"},
	}
	for _, tc := range tests {
		t.Run(tc.route.String(), func(t *testing.T) {
			fake, bin, codexHome, env, cwd := newCodex(t)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			srv, err := StartAppServer(ctx, bin, env, cwd)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := srv.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
			}()
			tg := agents.Target{Home: codexHome, Cwd: cwd, SessionID: "ses-e2e-app"}
			imp, err := Import(ctx, srv, tc.route, tg, conversation())
			if err != nil {
				t.Fatalf("import: %v\nstderr:\n%s", err, srv.Stderr())
			}
			wantID, _ := ThreadID(tg)
			if (imp.Thread.ID == wantID) != tc.keepsID {
				t.Errorf("thread id %s, cast's %s, want kept=%v", imp.Thread.ID, wantID, tc.keepsID)
			}
			tr, err := srv.RunTurn(ctx, imp.Thread.ID, tc.newPrompt)
			if err != nil {
				t.Fatalf("turn: %v\nstderr:\n%s", err, srv.Stderr())
			}
			if tr.Status != "completed" || !strings.Contains(tr.Text, tc.newPrompt) {
				t.Errorf("turn %s, answer %q", tr.Status, tr.Text)
			}
			turns := fake.Turns()
			if len(turns) != 1 {
				t.Fatalf("%d model requests, want 1", len(turns))
			}
			assertInOrder(t, turns[0].Items, append(append([]string{}, wantItems...), `user text "`+tc.newPrompt+`"`))

			var read struct {
				Thread struct {
					Turns []json.RawMessage `json:"turns"`
				} `json:"thread"`
			}
			if err := srv.Call(ctx, "thread/read", map[string]any{"threadId": imp.Thread.ID, "includeTurns": true}, &read); err != nil {
				t.Fatal(err)
			}
			// The conversation has two user turns, plus the one just run.
			if got := len(read.Thread.Turns); tc.uiTurns && got != 3 || !tc.uiTurns && got != 1 {
				t.Errorf("thread/read shows %d turns (ui turns expected: %v)", got, tc.uiTurns)
			}
		})
	}
}
