package validate

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cast-dev/cast/internal/errs"
)

func TestStringRules(t *testing.T) {
	tests := []struct {
		kind Kind
		v    string
		want string // "" passes; else a fragment of the refusal
	}{
		{Model, "claude-sonnet-4-5", ""},
		{Model, "openai/gpt-5", ""},
		{Model, "anthropic/claude@2025+x:1.5_b", ""},
		{Model, "high", ""},
		{Model, "--dangerously-skip-permissions", "read as a flag"},
		{Model, "-m", "read as a flag"},
		{Model, "gpt 5", "malformed"},
		{Model, "gpt\x005", "malformed"},
		{Model, "gpt;rm", "malformed"},
		{Model, strings.Repeat("a", 129), "over the limit of 128"},
		{Name, "n1", ""},
		{Name, "-n1", "read as a flag"},
		{Name, strings.Repeat("n", 64), "over the limit of 63"},
		{UserName, "alice.b+cast@example.com", ""},
		{UserName, "alice", ""},
		{UserName, "-alice@example.com", "read as a flag"},
		{UserName, "alice smith", "malformed"},
		{UserName, "alice\n", "malformed"},
		{UserName, strings.Repeat("a", 255), "over the limit of 254"},
		{SessionID, "jx731jg", ""},
		{SessionID, "JX731JG", "malformed"},
		{ClientID, "01JDQ3Z1W5K7Y7Y7Y7Y7Y7Y7Y7", ""},
		{ClientID, "a b", "malformed"},
		{RequestID, "01JDQ3Z1W5K7Y7Y7Y7Y7Y7Y7Y7", ""},
		{RequestID, "n1", ""},
		{RequestID, "n.01JDQ3Z1W5K7Y7Y7Y7Y7Y7Y7Y7", "cast's own"},
		{RequestID, "adopt.x", "cast's own"},
		{RequestID, "a b", "malformed"},
		{Branch, "feat/x", ""},
		{Branch, "-x", "read as a flag"},
		{Branch, "--upload-pack=x", "read as a flag"},
		{Branch, "a..b", "malformed"},
		{Branch, "HEAD~1", "malformed"},
		{RepoPath, "services/api", ""},
		{RepoPath, ".", ""},
		{RepoPath, "../../etc", "leaves the checkout"},
		{RepoPath, "a/../../b", "leaves the checkout"},
		{RepoPath, "/etc", "absolute path"},
		{RepoPath, "--upload-pack=x", "starts with '-'"},
		{RepoPath, "a/-x", "starting with '-'"},
		{RepoPath, "a\nb", "control character"},
		{NativeID, "0f8fad5b-d9cb-469f-a165-70867728950e", ""},
		{NativeID, "ses_abc#run-toolu_01", ""},
		{NativeID, "rollout 2025.jsonl", ""},
		{NativeID, "../../.ssh/authorized_keys", "path separator"},
		{NativeID, "..", "not a name"},
		{NativeID, `a\b`, "path separator"},
		{NativeID, "--dangerously-skip-permissions", "read as a flag"},
		{NativeID, "a\nb", "control character"},
		{Title, "Refactor the parser", ""},
		{Title, "naïve ✓ title", ""},
		{Title, "two\nlines", "control character"},
		{Title, "bell\a", "control character"},
		{Title, "esc\x1b[31m", "control character"},
		{Title, strings.Repeat("t", 1<<20), "over the limit of 256"},
		{Title, "bad \xff", "UTF-8"},
		{Cwd, "/home/me/src", ""},
		{Cwd, "/tmp/with space", ""},
		{Cwd, "relative/dir", "not an absolute path"},
		{Cwd, "/tmp/a\nb", "control character"},
		{Cwd, "/tmp/a\x00b", "control character"},
		{Cwd, "/" + strings.Repeat("d", 4096), "over the limit of 4096"},
		{Prompt, "refactor the parser\n\twith tabs\x1b[0m", ""},
		{Prompt, "nul \x00 here", "NUL byte"},
		{Prompt, "bad \xff", "UTF-8"},
		{Text, "tool output \x00 is kept", ""},
		{Text, "bad \xff", "UTF-8"},
		{Reason, "codex: not logged in", ""},
		{Reason, strings.Repeat("r", 4097), "over the limit"},
		{Reason, "a\x00b", "NUL"},
		{ToolName, "Bash", ""},
		{ToolName, "Ba\nsh", "control character"},
		{Ident, "msg_01", ""},
		{Ident, "a\nb", "control character"},
		{PermissionArg, `{"command":"ls"}`, ""},
		{PermissionArg, "a\x00", "NUL"},
		{PageToken, "eyJhIjoieCIsInIiOjV9", ""},
		{PageToken, "eyJh+/==", "malformed"},
		{PageToken, strings.Repeat("a", 1025), "over the limit"},
	}
	for _, tc := range tests {
		err := Check(tc.kind, "f", tc.v)
		assertRefusal(t, Show(tc.v), err, tc.want)
	}
}

func assertRefusal(t *testing.T, what string, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Errorf("%s: refused: %v", what, err)
		}
		return
	}
	e, ok := errs.As(err)
	if !ok || e.Kind != errs.KindInvalid || !strings.Contains(e.Msg, want) ||
		(e.Reason != errs.ReasonInvalidArgument && e.Reason != errs.ReasonBadPageToken) {
		t.Errorf("%s: got %v, want INVALID_ARGUMENT containing %q", what, err, want)
		return
	}
	if e.Metadata["field"] == "" || len(e.Msg) > 400 || strings.ContainsAny(e.Msg, "\n\x00") {
		t.Errorf("%s: refusal lacks a field or is not one short line: %q %v", what, e.Msg, e.Metadata)
	}
}

func TestEmptyAndRequired(t *testing.T) {
	if err := Check(Model, "model", ""); err != nil {
		t.Errorf("empty optional: %v", err)
	}
	assertRefusal(t, "need", Need(Name, "node", ""), "node is required")
	assertRefusal(t, "each", Each(SessionID, "session_ids", []string{"jx731jg", "BAD"}, 10), "session_ids[1]")
	assertRefusal(t, "each cap", Each(SessionID, "session_ids", []string{"jx731jg", "jx731jh"}, 1), "at most 1")
}

func TestNumberRules(t *testing.T) {
	names := map[int32]string{0: "UNSPECIFIED", 1: "IDLE", 2: "RUNNING"}
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"seq unset", Seq("delivered_seq", 0, 5), ""},
		{"seq last", Seq("delivered_seq", 5, 5), ""},
		{"seq past last", Seq("delivered_seq", 6, 5), "outside the session"},
		{"seq max", Seq("delivered_seq", math.MaxInt64, 5), "outside the session"},
		{"seq negative", Seq("delivered_seq", -1, 5), "outside the session"},
		{"range ok", Range("max_parallel", 3, 0, 64), ""},
		{"range high", Range("max_parallel", 65, 0, 64), "use 0 to 64"},
		{"percent", Percent("used_percent", 42.5, 100), ""},
		{"percent NaN", Percent("used_percent", math.NaN(), 100), "not a percentage"},
		{"percent +Inf", Percent("used_percent", math.Inf(1), 100), "not a percentage"},
		{"percent -Inf", Percent("used_percent", math.Inf(-1), 100), "not a percentage"},
		{"percent negative", Percent("used_percent", -1, 100), "not a percentage"},
		{"percent over", Percent("used_percent", 101, 100), "not a percentage"},
		{"enum", Enum("state", 1, names, false), ""},
		{"enum unspecified", Enum("state", 0, names, false), "use one of IDLE, RUNNING"},
		{"enum unspecified ok", Enum("kind", 0, names, true), ""},
		{"enum out of range", Enum("state", 7, names, false), "state 7 is not valid"},
		{"time past", Past("create_time", now.Add(-24*365*time.Hour), now), ""},
		{"time skew", Past("create_time", now.Add(time.Minute), now), ""},
		{"time future", Past("create_time", now.Add(time.Hour), now), "leave it unset"},
		{"time before 1970", Past("create_time", time.Unix(-1, 0), now), "between 1970"},
	}
	for _, tc := range tests {
		assertRefusal(t, tc.name, tc.err, tc.want)
	}
}

func TestShowIsShortAndOneLine(t *testing.T) {
	got := Show(strings.Repeat("é", 100) + "\n")
	if len(got) > 70 || strings.Contains(got, "\n") {
		t.Fatalf("Show = %q", got)
	}
}

func TestPageTokenKeepsItsReason(t *testing.T) {
	if !errs.HasReason(Check(PageToken, "page_token", "a+b"), errs.ReasonBadPageToken) {
		t.Fatal("a malformed page token is not INVALID_PAGE_TOKEN")
	}
}

// TitleFrom puts a message's words on one line and cuts at 60 runes.
func TestTitleFrom(t *testing.T) {
	long := strings.Repeat("é", 61)
	for in, want := range map[string]string{
		"":                      "",
		"  fix\tthe\n\nbuild  ": "fix the build",
		strings.Repeat("é", 60): strings.Repeat("é", 60),
		long:                    strings.Repeat("é", 60) + "…",
	} {
		if got := TitleFrom(in); got != want {
			t.Errorf("TitleFrom(%q) = %q, want %q", in, got, want)
		}
	}
}
