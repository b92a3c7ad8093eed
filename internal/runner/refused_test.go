package runner_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cast-dev/cast/internal/agents/agenttest"
	"github.com/cast-dev/cast/internal/runner"
)

// refusingServer is a model on 127.0.0.1 that refuses every turn, in each
// wire protocol's own way (the shared fake has no refusal reply).
func refusingServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		p := r.URL.Path
		switch {
		case strings.HasSuffix(p, "/count_tokens"), strings.HasSuffix(p, ":countTokens"):
			fmt.Fprint(w, `{"input_tokens":1,"totalTokens":1}`)
			return
		case strings.HasSuffix(p, ":generateContent"):
			w.Header().Set("Content-Type", "application/json")
			// gemini's router and summary side calls get a valid answer.
			fmt.Fprint(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":"{\"complexity_reasoning\":\"simple\",\"complexity_score\":1}"}]},"finishReason":"STOP","index":0}]}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Connection", "close")
		switch {
		case strings.HasSuffix(p, "/messages"):
			fmt.Fprint(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_r1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-opus-4-8\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n")
			fmt.Fprint(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"refusal\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":1}}\n\n")
			fmt.Fprint(w, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
		case strings.HasSuffix(p, "/chat/completions"):
			fmt.Fprint(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake-model\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":\"content_filter\"}]}\n\n")
			fmt.Fprint(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"fake-model\",\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":0,\"total_tokens\":1}}\n\n")
			fmt.Fprint(w, "data: [DONE]\n\n")
		case strings.HasSuffix(p, ":streamGenerateContent"):
			fmt.Fprint(w, "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[]},\"finishReason\":\"SAFETY\",\"index\":0}],\"promptFeedback\":{\"blockReason\":\"SAFETY\"},\"usageMetadata\":{\"promptTokenCount\":1,\"totalTokenCount\":1}}\n\n")
		case strings.HasSuffix(p, "/responses"):
			fmt.Fprint(w, "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"output\":[]}}\n\n")
			fmt.Fprint(w, "event: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"response\":{\"id\":\"resp_1\",\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":\"content_filter\"},\"output\":[]}}\n\n")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestRefused: a model that refuses (Anthropic stop_reason "refusal",
// Chat finish_reason "content_filter", Responses incomplete for
// content_filter, Gemini finishReason SAFETY) fails the turn as "refused"
// with nothing emitted.
func TestRefused(t *testing.T) {
	for _, c := range cases {
		t.Run(c.agent, func(t *testing.T) {
			t.Parallel()
			srv := refusingServer(t)
			r, turn := setup(t, c, srv.URL)
			turn.Env = append(turn.Env, "CLAUDE_CODE_MAX_RETRIES=0")
			turn.Prompt = "something the model refuses"
			res, got, _, err := run(t, r, turn)
			if res.Reason != runner.ReasonRefused || !errors.Is(err, &runner.Error{Reason: runner.ReasonRefused}) {
				t.Fatalf("reason %q err %v, want %q", res.Reason, err, runner.ReasonRefused)
			}
			if len(got) != 0 {
				t.Fatalf("a refused turn emitted %v", kinds(got))
			}
		})
	}
}

// TestNotLoggedIn: the real CLIs with no login at all (an empty home, no
// key) fail the turn as "not logged in", each from its own message, before
// any network. (Codex and OpenCode without a login go to their providers'
// servers, so they are not run here.)
func TestNotLoggedIn(t *testing.T) {
	for _, agent := range []string{"claude", "gemini", "pi"} {
		t.Run(agent, func(t *testing.T) {
			t.Parallel()
			r := &runner.Runner{Bins: map[string]string{agent: agenttest.Bin(t, agent)}, Logf: t.Logf}
			turn := runner.Turn{Agent: agent, Cwd: t.TempDir(), Home: t.TempDir(), Prompt: "hello"}
			res, _, _, err := run(t, r, turn)
			if res.Reason != runner.ReasonNotLoggedIn || !errors.Is(err, &runner.Error{Reason: runner.ReasonNotLoggedIn}) {
				t.Fatalf("reason %q err %v, want %q", res.Reason, err, runner.ReasonNotLoggedIn)
			}
		})
	}
}
