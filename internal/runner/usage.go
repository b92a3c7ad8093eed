package runner

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"time"
)

// UsageWindow is one of a provider's usage windows as the agent last
// reported it: how much of it is used and when it resets.
type UsageWindow struct {
	Name          string // "primary" (Codex's 5-hour window), "secondary" (weekly)
	UsedPercent   float64
	WindowMinutes int
	ResetsAt      time.Time // zero when the provider did not say
}

// codexUsage reads the last rate_limits Codex recorded in the rollout: it
// parses the provider's x-codex-primary-*/secondary-* response headers into
// event_msg token_count lines. None when the provider sent none.
func codexUsage(path string) []UsageWindow {
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
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
		if !jsonHas(line, `"token_count"`) || !jsonHas(line, `"rate_limits"`) {
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
	var out []UsageWindow
	for _, w := range []struct {
		name string
		w    *window
	}{{"primary", last.Primary}, {"secondary", last.Secondary}} {
		if w.w == nil || w.w.UsedPercent == nil {
			continue
		}
		u := UsageWindow{Name: w.name, UsedPercent: *w.w.UsedPercent, WindowMinutes: w.w.WindowMinutes}
		if w.w.ResetsAt > 0 {
			u.ResetsAt = time.Unix(w.w.ResetsAt, 0).UTC()
		}
		out = append(out, u)
	}
	return out
}

func jsonHas(line []byte, s string) bool { return bytes.Contains(line, []byte(s)) }
