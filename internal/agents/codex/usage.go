package codex

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"time"

	"github.com/cast-dev/cast/internal/quota"
)

// codexTail is how much of the rollout's end codexUsage reads: Codex
// records rate_limits after each model response, so the turn's last one is
// near the end, and a long session's rollout is never read whole.
const codexTail = 1 << 20

// Usage reads the last rate_limits Codex recorded in the rollout: it
// parses the provider's x-codex-primary-*/secondary-* response headers into
// event_msg token_count lines. None when the provider sent none.
func (Driver) Usage(path string) []quota.Window {
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > codexTail {
		if _, err := f.Seek(fi.Size()-codexTail, io.SeekStart); err != nil {
			return nil
		}
		// The first line read is a fragment; it fails to decode and is skipped.
	}
	type window struct {
		UsedPercent   *float64 `json:"used_percent"`
		WindowMinutes int      `json:"window_minutes"`
		ResetsAt      int64    `json:"resets_at"`
	}
	var last *struct {
		Primary   *window `json:"primary"`
		Secondary *window `json:"secondary"`
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, []byte(`"token_count"`)) || !bytes.Contains(line, []byte(`"rate_limits"`)) {
			continue // most lines: skip without decoding
		}
		var ev struct {
			Type    string `json:"type"`
			Payload struct {
				Type       string `json:"type"`
				RateLimits *struct {
					Primary   *window `json:"primary"`
					Secondary *window `json:"secondary"`
				} `json:"rate_limits"`
			} `json:"payload"`
		}
		if json.Unmarshal(line, &ev) == nil && ev.Type == "event_msg" && ev.Payload.Type == "token_count" && ev.Payload.RateLimits != nil {
			last = ev.Payload.RateLimits
		}
	}
	if last == nil {
		return nil
	}
	var out []quota.Window
	for _, w := range []struct {
		name string
		w    *window
	}{{"primary", last.Primary}, {"secondary", last.Secondary}} {
		if w.w == nil || w.w.UsedPercent == nil {
			continue
		}
		u := quota.Window{Name: w.name, UsedPercent: *w.w.UsedPercent, WindowMinutes: w.w.WindowMinutes}
		if w.w.ResetsAt > 0 {
			u.ResetsAt = time.Unix(w.w.ResetsAt, 0).UTC()
		}
		out = append(out, u)
	}
	return out
}
