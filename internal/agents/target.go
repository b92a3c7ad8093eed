package agents

import (
	"fmt"
	"path/filepath"

	"github.com/cast-dev/cast/internal/agents/repair"
)

// Check is what every writer needs of t before it writes: the agent's own
// folder and an absolute working directory. The error names agent.
func (t Target) Check(agent string) error {
	if t.Home == "" || !filepath.IsAbs(t.Cwd) {
		return fmt.Errorf("%s: target needs a home and an absolute cwd", agent)
	}
	return nil
}

// StableID is t.NativeID, else a UUID derived from agent and the cast
// session id, so every rewrite of the session gets the same one.
func (t Target) StableID(agent string) string {
	if t.NativeID != "" {
		return t.NativeID
	}
	return repair.StableUUID(agent + ":" + t.SessionID)
}

// Session is Check of t for agent, then what a writer that names its
// file by the session takes from t: the native id (StableID) and the
// working directory cleaned.
func (t Target) Session(agent string) (sid, cwd string, err error) {
	if err := t.Check(agent); err != nil {
		return "", "", err
	}
	return t.StableID(agent), filepath.Clean(t.Cwd), nil
}
