package runner

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/cast-dev/cast/internal/quota"
)

// codexTail is how much of the rollout's end codexUsage reads: Codex
// records rate_limits after each model response, so the turn's last one is
// near the end, and a long session's rollout is never read whole.
const codexTail = 1 << 20

// codexUsage reads the last rate_limits Codex recorded in the rollout: it
// parses the provider's x-codex-primary-*/secondary-* response headers into
// event_msg token_count lines. None when the provider sent none.
func codexUsage(path string) []quota.Window {
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

// claudeWindows are Claude's rate limit types: each one's length, and the
// model a per-model weekly window is for.
var claudeWindows = map[string]quota.Window{
	"five_hour":        {WindowMinutes: 300},
	"seven_day":        {WindowMinutes: 7 * 24 * 60},
	"seven_day_opus":   {WindowMinutes: 7 * 24 * 60, Model: "opus"},
	"seven_day_sonnet": {WindowMinutes: 7 * 24 * 60, Model: "sonnet"},
}

// claudeEvent reads claude's stream-json events: rate_limit_event carries
// a usage window (from the provider's anthropic-ratelimit-unified-*
// headers), and an error result carries the message and HTTP status that
// classify needs.
func (d *driver) claudeEvent(line []byte) {
	var ev struct {
		Type  string `json:"type"`
		Limit *struct {
			Status      string   `json:"status"`
			ResetsAt    int64    `json:"resetsAt"`
			Type        string   `json:"rateLimitType"`
			Utilization *float64 `json:"utilization"`
		} `json:"rate_limit_info"`
		IsError bool   `json:"is_error"`
		Result  string `json:"result"`
		Status  *int   `json:"api_error_status"`
	}
	if json.Unmarshal(line, &ev) != nil {
		return
	}
	switch {
	case ev.Type == "rate_limit_event" && ev.Limit != nil && ev.Limit.Type != "":
		w := claudeWindows[ev.Limit.Type]
		w.Name = ev.Limit.Type
		if ev.Limit.Utilization != nil {
			w.UsedPercent = *ev.Limit.Utilization * 100
		} else if ev.Limit.Status == "rejected" {
			w.UsedPercent = 100
		}
		if ev.Limit.ResetsAt > 0 {
			w.ResetsAt = time.Unix(ev.Limit.ResetsAt, 0).UTC()
		}
		d.mu.Lock()
		if d.limits == nil {
			d.limits = map[string]quota.Window{}
		}
		d.limits[w.Name] = w
		d.mu.Unlock()
	case ev.Type == "result" && ev.IsError:
		msg := ev.Result
		if ev.Status != nil {
			msg = fmt.Sprintf("API error %d: %s", *ev.Status, msg)
		}
		d.addStreamErr(msg)
	}
}

// claudeUsage is the windows the turn's rate_limit_events reported, by name.
func (d *driver) claudeUsage() []quota.Window {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]quota.Window, 0, len(d.limits))
	for _, w := range d.limits {
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if len(out) == 0 {
		return nil
	}
	return out
}
