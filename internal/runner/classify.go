package runner

import (
	"fmt"
	"regexp"
	"strings"
)

// A failed turn's reason comes from what the CLI printed. The patterns are
// the messages the pinned CLIs print (and the status codes they quote);
// the first class with a matching line wins.
var reasonPatterns = []struct {
	reason string
	re     *regexp.Regexp
}{
	{ReasonNotLoggedIn, regexp.MustCompile(`(?i)\b401\b|unauthori[sz]ed|invalid[ _-]?(api[ _-]?key|x-api-key|auth)|incorrect api key|api key not valid|authentication[ _]?(error|failed|required)|not logged in|/login\b|(no|missing) api key|api key is missing|token (has )?expired|missing environment variable: .?\w*(key|token)|must specify the \w*api_key|invalid auth method`)},
	{ReasonRateLimited, regexp.MustCompile(`(?i)\b429\b|rate[ _-]?limit|too many requests|usage limit|quota|resource[ _]exhausted|hit your (\w+ )?limit`)},
	{ReasonNoSession, regexp.MustCompile(`(?i)no conversation found|no rollout found|no previous sessions found|session not found|no session found|error resuming session`)},
	{ReasonRefused, regexp.MustCompile(`(?i)\brefus(al|ed to)\b|declined to|content[ _]filter|content policy|prohibited[ _]content|blocked by safety|stop_reason.{0,4}refusal|violate.{0,10}usage policy|unable to respond to this request|blocked due to safety|finish_?reason.{0,4}(safety|content_filter)|input exceeds the maximum length|input_too_large`)},
}

var ansi = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)

// connRefused is a network error, not a refusal.
var connRefused = regexp.MustCompile(`(?i)connection refused|econnrefused`)

// classify says why a turn failed ("" when it did not).
//
// A CLI that exits 0 without any model output is checked too: gemini
// reports a blocked answer on stderr and exits 0.
func (d *driver) classify(exit, emitted int, stdout, stderr string) (reason, detail string) {
	d.mu.Lock()
	errs := append([]string(nil), d.streamErrs...)
	saw := d.sawOutput
	d.mu.Unlock()
	failed := exit != 0 || len(errs) > 0
	if on := d.a.Commands.FailedOnStderr; on != "" && !saw && strings.Contains(stderr, on) {
		failed = true // the CLI exits 0 after giving up (opencode on a failing provider)
	}
	if !failed && emitted > 0 {
		return "", ""
	}
	var lines []string
	for _, e := range errs {
		lines = append(lines, strings.Split(e, "\n")...)
	}
	stderr, stdout = ansi.ReplaceAllString(stderr, ""), ansi.ReplaceAllString(stdout, "")
	lines = append(lines, strings.Split(stderr, "\n")...)
	lines = append(lines, strings.Split(stdout, "\n")...)
	login := d.a.Login
	said := make([]string, len(lines))
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
		said[i] = textOf(lines[i])
	}
	for i, l := range said {
		if l != "" && login.IsLoggedOut(l) {
			return ReasonNotLoggedIn, clip(lines[i], 400)
		}
	}
	for _, p := range reasonPatterns {
		for i, l := range said {
			if l == "" || !p.re.MatchString(l) {
				continue
			}
			if p.reason == ReasonRefused && connRefused.MatchString(l) {
				continue
			}
			return p.reason, clip(lines[i], 400)
		}
	}
	if !failed {
		return "", "" // a quiet turn with no known failure message
	}
	detail = clip(lastLines(strings.Join(errs, "\n")+"\n"+stderr+"\n"+stdout, 6), 600)
	return ReasonFailed, fmt.Sprintf("exit %d: %s", exit, detail)
}

// jsonNumber is a number a JSON field holds ("duration_ms":401).
var jsonNumber = regexp.MustCompile(`"(\w+)"\s*:\s*-?\d+(\.\d+)?([eE][-+]?\d+)?`)

// statusKeys are the JSON fields whose number is an HTTP or API status.
var statusKeys = map[string]bool{"status": true, "code": true, "status_code": true, "statusCode": true, "api_error_status": true, "http_status": true}

// textOf is what a printed line says, for the patterns above: the line
// with the numbers of JSON fields other than statuses left out. Those are
// timings, counts and sizes: claude's stream-json result of a throttled
// turn that took 401 ms matched `\b401\b` and was read as a lost login.
func textOf(line string) string {
	if !strings.Contains(line, `"`) {
		return line
	}
	return jsonNumber.ReplaceAllStringFunc(line, func(field string) string {
		key := jsonNumber.FindStringSubmatch(field)[1]
		if statusKeys[key] {
			return field
		}
		return `"` + key + `":#`
	})
}
