package fakemodel

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// post sends body to the fake and returns the status and the concatenated
// SSE data payloads (or the plain body).
func post(t *testing.T, s *Server, path, body string) (int, string, *http.Response) {
	t.Helper()
	resp, err := http.Post(s.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp
	}
	var data []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = append(data, d)
		}
	}
	return resp.StatusCode, strings.Join(data, "\n"), resp
}

// One conversation (system, user, assistant text + tool call, tool result,
// user) in each wire format.
var conversations = []struct {
	name, path, body string
}{
	{"anthropic", "/v1/messages?beta=true", `{"model":"claude-x","stream":true,
		"system":[{"type":"text","text":"SYS"}],
		"tools":[{"name":"Bash","input_schema":{"properties":{"command":{},"description":{}}}}],
		"messages":[
		{"role":"user","content":"U1"},
		{"role":"assistant","content":[{"type":"thinking","thinking":"TH"},{"type":"text","text":"A1"},{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"OUT"}],"is_error":true}]},
		{"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"U2"}]}]}`},
	{"responses", "/v1/responses", `{"model":"gpt-x","stream":true,"instructions":"SYS",
		"tools":[{"type":"function","name":"exec_command","parameters":{"properties":{"cmd":{}}}}],
		"input":[
		{"type":"message","role":"user","content":[{"type":"input_text","text":"U1"}]},
		{"type":"reasoning","summary":[{"type":"summary_text","text":"TH"}]},
		{"type":"message","role":"assistant","content":[{"type":"output_text","text":"A1"}]},
		{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"ls\"}","call_id":"t1"},
		{"type":"function_call_output","call_id":"t1","output":"OUT"},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"U2"}]}]}`},
	{"chat", "/v1/chat/completions", `{"model":"fake-model","stream":true,"stream_options":{"include_usage":true},
		"tools":[{"type":"function","function":{"name":"bash","parameters":{"properties":{"command":{},"description":{}}}}}],
		"messages":[
		{"role":"system","content":"SYS"},
		{"role":"user","content":[{"type":"text","text":"U1"}]},
		{"role":"assistant","reasoning_content":"TH","content":"A1","tool_calls":[{"id":"t1","type":"function","function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]},
		{"role":"tool","tool_call_id":"t1","content":"OUT"},
		{"role":"user","content":"U2"}]}`},
	{"gemini", "/v1beta/models/gem-x:streamGenerateContent?alt=sse", `{
		"systemInstruction":{"parts":[{"text":"SYS"}]},
		"tools":[{"functionDeclarations":[{"name":"run_shell_command","parametersJsonSchema":{"properties":{"command":{}}}}]}],
		"contents":[
		{"role":"user","parts":[{"text":"U1"}]},
		{"role":"model","parts":[{"thought":true,"text":"TH"},{"text":"A1"},{"functionCall":{"id":"t1","name":"run_shell_command","args":{"command":"ls"}}}]},
		{"role":"user","parts":[{"functionResponse":{"id":"t1","name":"run_shell_command","response":{"output":"OUT"}}}]},
		{"role":"user","parts":[{"text":"U2"}]}]}`},
}

// summary renders items compactly: kind:text or call/result markers.
func summary(items []Item) []string {
	var out []string
	for _, it := range items {
		switch it.Kind {
		case KindToolCall:
			out = append(out, "call:"+it.ToolCallID+":"+it.ToolName)
		case KindToolResult:
			out = append(out, "result:"+it.ToolCallID)
		default:
			out = append(out, it.Role+":"+it.Kind+":"+it.Text)
		}
	}
	return out
}

func TestNormalizeAndDefaultReply(t *testing.T) {
	for _, c := range conversations {
		t.Run(c.name, func(t *testing.T) {
			s := Start(t)
			status, out, resp := post(t, s, c.path, c.body)
			if status != 200 {
				t.Fatalf("status %d: %s", status, out)
			}
			if !resp.Close {
				t.Errorf("SSE answer must close the connection")
			}
			reqs := s.Turns()
			if len(reqs) != 1 {
				t.Fatalf("recorded %d turns, want 1", len(reqs))
			}
			got := strings.Join(summary(reqs[0].Items), " | ")
			for _, want := range []string{"system:text:SYS", "user:text:U1", "assistant:thinking:TH",
				"assistant:text:A1", "call:t1:", "result:t1", "user:text:U2"} {
				if !strings.Contains(got, want) {
					t.Errorf("items %q lack %q", got, want)
				}
			}
			if i, j := strings.Index(got, "U1"), strings.Index(got, "U2"); i < 0 || j < i {
				t.Errorf("items out of order: %s", got)
			}
			if !strings.Contains(out, "FAKE-ANSWER #1: saw ") || !strings.Contains(out, "last user said: U2") {
				t.Errorf("reply %q lacks the default answer", out)
			}
			if c.name == "chat" && !strings.HasSuffix(out, "[DONE]") {
				t.Errorf("chat stream must end with [DONE]: %q", out)
			}
		})
	}
}

func TestToolTrigger(t *testing.T) {
	wants := map[string][]string{
		"anthropic": {`"name":"Bash"`, `\"command\":\"echo hi\"`, `"stop_reason":"tool_use"`},
		"responses": {`"name":"exec_command"`, `\"cmd\":\"echo hi\"`, `"type":"response.completed"`},
		"chat":      {`"name":"bash"`, `\"command\":\"echo hi\"`, `\"description\"`, `"finish_reason":"tool_calls"`},
		"gemini":    {`"functionCall"`, `"name":"run_shell_command"`, `"command":"echo hi"`},
	}
	for _, c := range conversations {
		t.Run(c.name, func(t *testing.T) {
			s := Start(t)
			body := strings.ReplaceAll(c.body, `"U2"`, `"please TOOLCALL now"`)
			_, out, _ := post(t, s, c.path, body)
			for _, w := range wants[c.name] {
				if !strings.Contains(out, w) {
					t.Errorf("reply lacks %s:\n%s", w, out)
				}
			}
		})
	}
}

func TestToolResultIsQuoted(t *testing.T) {
	for _, c := range conversations {
		t.Run(c.name, func(t *testing.T) {
			s := Start(t)
			// Cut the conversation after the tool result.
			body := c.body
			cut := map[string]string{ // the last user message, by wire format
				"anthropic": `{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"U2"}`,
				"responses": `,
		{"type":"message","role":"user","content":[{"type":"input_text","text":"U2"}]}`,
				"chat": `,
		{"role":"user","content":"U2"}`,
				"gemini": `,
		{"role":"user","parts":[{"text":"U2"}]}`,
			}[c.name]
			keep := ""
			if c.name == "anthropic" {
				keep = `{"type":"text","text":"<system-reminder>x</system-reminder>"}`
			}
			body = strings.Replace(body, cut, keep, 1)
			_, out, _ := post(t, s, c.path, body)
			if !strings.Contains(out, "FAKE: tool said ") || !strings.Contains(out, "OUT") {
				t.Errorf("reply does not quote the tool result:\n%s", out)
			}
		})
	}
}

func TestNonStreaming(t *testing.T) {
	tests := []struct{ name, path, body, want string }{
		{"anthropic", "/v1/messages", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, `"type":"message"`},
		{"responses", "/v1/responses", `{"model":"m","input":"hi"}`, `"object":"response"`},
		{"chat", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, `"object":"chat.completion"`},
		{"gemini array", "/v1beta/models/m:streamGenerateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`, `[{"candidates"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := Start(t)
			status, out, _ := post(t, s, tc.path, tc.body)
			if status != 200 || !strings.Contains(out, tc.want) || !strings.Contains(out, "last user said: hi") {
				t.Errorf("status %d body %s", status, out)
			}
		})
	}
}

func TestSideCalls(t *testing.T) {
	s := Start(t)
	tests := []struct{ path, body, want string }{
		{"/v1/messages/count_tokens", `{"messages":[{"role":"user","content":"hello"}]}`, `"input_tokens"`},
		{"/v1beta/models/m:countTokens", `{"contents":[]}`, `"totalTokens"`},
		{"/v1beta/models/flash-lite:generateContent", `{"contents":[{"role":"user","parts":[{"text":"route me"}]}],
			"generationConfig":{"responseJsonSchema":{"type":"object","properties":{"complexity_reasoning":{"type":"string"},"complexity_score":{"type":"integer","minimum":1}}}}}`,
			`complexity_score\":1`},
	}
	for _, tc := range tests {
		status, out, _ := post(t, s, tc.path, tc.body)
		if status != 200 || !strings.Contains(out, tc.want) {
			t.Errorf("%s: status %d body %s", tc.path, status, out)
		}
	}
	if n := len(s.Turns()); n != 0 {
		t.Errorf("side calls counted as %d turns", n)
	}
	if n := len(s.Requests()); n != len(tests) {
		t.Errorf("recorded %d requests, want %d", n, len(tests))
	}
}

func TestScriptAndFailures(t *testing.T) {
	s := Start(t)
	s.FailNext(2, 429)
	s.Enqueue(Reply{Text: "scripted"}, Reply{Tool: &ToolCall{Name: "Custom", Input: map[string]any{"a": 1}}})
	s.SetHeader("anthropic-ratelimit-unified-status", "allowed_warning")
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	for i, want := range []struct {
		status int
		text   string
	}{{429, "rate_limit_error"}, {429, "rate_limit_error"}, {200, "scripted"}, {200, `"name":"Custom"`}, {200, "FAKE-ANSWER #5"}} {
		status, out, resp := post(t, s, "/v1/messages", body)
		if status != want.status || !strings.Contains(out, want.text) {
			t.Errorf("call %d: status %d body %s, want %d %s", i, status, out, want.status, want.text)
		}
		if status == 429 && resp.Header.Get("Retry-After") != "0" {
			t.Errorf("429 without Retry-After")
		}
		if resp.Header.Get("anthropic-ratelimit-unified-status") != "allowed_warning" {
			t.Errorf("extra header missing")
		}
	}
	reqs := s.Requests()
	if reqs[0].Status != 429 || reqs[2].Status != 200 {
		t.Errorf("statuses not recorded: %d %d", reqs[0].Status, reqs[2].Status)
	}
}

func TestUnknownPathAndBadJSON(t *testing.T) {
	s := Start(t)
	resp, err := http.Head(s.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("HEAD / = %d, want 404", resp.StatusCode)
	}
	status, _, _ := post(t, s, "/v1/messages", "{not json")
	if status != 400 {
		t.Errorf("bad JSON = %d, want 400", status)
	}
	reqs := s.Requests()
	if len(reqs) != 2 || reqs[0].Method != "HEAD" || reqs[1].API != Anthropic {
		t.Errorf("requests = %+v", reqs)
	}
	var v any
	if json.Unmarshal(reqs[1].Body, &v) == nil {
		t.Errorf("raw body not kept as sent")
	}
}

func TestTitleHelperIsSide(t *testing.T) {
	s := Start(t)
	s.FailNext(1, 500)
	body := `{"model":"m","stream":true,"messages":[{"role":"system","content":"You are a title generator. You output ONLY a thread title."},{"role":"user","content":"hi"}]}`
	status, out, _ := post(t, s, "/v1/chat/completions", body)
	if status != 200 || !strings.Contains(out, "Fake title") {
		t.Fatalf("title call: %d %s", status, out)
	}
	if len(s.Turns()) != 0 {
		t.Fatal("a title call counted as a turn")
	}
	if status, _, _ := post(t, s, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`); status != 500 {
		t.Fatalf("the injected failure should hit the real turn, got %d", status)
	}
}

func TestCheckPairs(t *testing.T) {
	c := func(id, name string) Item {
		return Item{Role: "assistant", Kind: KindToolCall, ToolCallID: id, ToolName: name}
	}
	r := func(id, name string) Item {
		return Item{Role: "tool", Kind: KindToolResult, ToolCallID: id, ToolName: name}
	}
	at := Item{Role: "assistant", Kind: KindText, Text: "a"}
	ut := Item{Role: "user", Kind: KindText, Text: "u"}
	tests := []struct {
		name  string
		items []Item
		ok    bool
	}{
		{"paired", []Item{ut, c("1", "x"), r("1", ""), at}, true},
		{"parallel", []Item{ut, c("1", "x"), c("2", "x"), r("2", ""), r("1", ""), at}, true},
		{"gemini by name", []Item{ut, c("", "sh"), r("abc", "sh"), at}, true},
		{"orphan result", []Item{ut, r("9", ""), at}, false},
		{"call never answered", []Item{ut, c("1", "x"), at, ut}, false},
		{"answer after the user spoke", []Item{ut, c("1", "x"), ut, r("1", "")}, false},
		{"one of two answered", []Item{ut, c("1", "x"), c("2", "x"), r("1", ""), at}, false},
		{"open at the end", []Item{ut, c("1", "x")}, false},
		{"reminder does not count", []Item{ut, c("1", "x"), {Role: "user", Kind: KindText, Text: "<system-reminder>x</system-reminder>"}, r("1", "")}, true},
	}
	for _, tc := range tests {
		if err := checkPairs(tc.items); (err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestStrictAndDelay(t *testing.T) {
	s := Start(t)
	s.SetStrict(true)
	orphan := `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"x","content":"out"}]}`
	if status, out, _ := post(t, s, "/v1/chat/completions", orphan); status != 400 || !strings.Contains(out, "answers no earlier call") {
		t.Errorf("strict accepted an orphan result: %d %s", status, out)
	}
	s.SetStrict(false)
	if status, _, _ := post(t, s, "/v1/chat/completions", orphan); status != 200 {
		t.Errorf("lenient mode rejected: %d", status)
	}
	s.Enqueue(Reply{Text: "late", Delay: 5 * time.Second})
	client := &http.Client{Timeout: 200 * time.Millisecond}
	if _, err := client.Post(s.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"messages":[]}`)); err == nil {
		t.Fatal("a delayed answer arrived before the client timeout")
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		reqs := s.Requests()
		if reqs[len(reqs)-1].Status == 499 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("abandoned request not recorded as 499: %+v", reqs[len(reqs)-1].Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A gated reply waits for its gate, whatever the order of the calls.
func TestGateHoldsTheAnswer(t *testing.T) {
	s := Start(t)
	gate := make(chan struct{})
	s.Enqueue(Repeat(2, Reply{Text: "gated", Gate: gate})...)
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	got := make(chan string, 1)
	go func() {
		_, out, _ := post(t, s, "/v1/messages", body)
		got <- out
	}()
	for s.TurnsStarted() < 1 {
		time.Sleep(5 * time.Millisecond) // polls the fake's own counter
	}
	select {
	case out := <-got:
		t.Fatalf("answered before the gate opened: %s", out)
	default:
	}
	close(gate)
	if out := <-got; !strings.Contains(out, "gated") {
		t.Fatalf("gated answer %s", out)
	}
	if _, out, _ := post(t, s, "/v1/messages", body); !strings.Contains(out, "gated") {
		t.Fatalf("second copy of the reply: %s", out)
	}
}

// Parallel asks for one tool call several times in one Anthropic answer,
// each with its own id.
func TestParallelToolCalls(t *testing.T) {
	s := Start(t)
	s.Enqueue(Reply{Tool: &ToolCall{Name: "Read", Input: map[string]any{"file_path": "/x"}}, Parallel: 3})
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	_, out, _ := post(t, s, "/v1/messages", body)
	var msg struct {
		Content []struct{ Type, ID, Name string }
		Stop    string `json:"stop_reason"`
	}
	if err := json.Unmarshal([]byte(out), &msg); err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, b := range msg.Content {
		if b.Type == "tool_use" && b.Name == "Read" {
			ids[b.ID] = true
		}
	}
	if len(ids) != 3 || msg.Stop != "tool_use" {
		t.Fatalf("answer %s: want 3 Read calls with distinct ids", out)
	}
}

// A policy answers what nothing queued answers, sees the request's items,
// and may hold one request (Gate) while another is answered; a queued reply
// and an injected failure still come first, and nil restores the default.
func TestPolicyAnswersPerRequest(t *testing.T) {
	s := Start(t)
	gate := make(chan struct{})
	held := make(chan struct{})
	s.SetPolicy(func(r Request) Reply {
		if LastUserText(r.Items) == "hold me" {
			close(held)
			return Reply{Text: "released", Gate: gate}
		}
		return Reply{Text: "policy saw " + LastUserText(r.Items)}
	})
	body := func(text string) string {
		return `{"model":"m","stream":true,"messages":[{"role":"user","content":"` + text + `"}]}`
	}
	got := make(chan string, 1)
	go func() {
		_, out, _ := post(t, s, "/v1/messages", body("hold me"))
		got <- out
	}()
	<-held
	if _, out, _ := post(t, s, "/v1/messages", body("hi")); !strings.Contains(out, "policy saw hi") {
		t.Fatalf("policy answer while another request is held: %s", out)
	}
	close(gate)
	if out := <-got; !strings.Contains(out, "released") {
		t.Fatalf("held answer: %s", out)
	}
	s.Enqueue(Reply{Text: "queued"})
	s.FailNext(1, 500)
	for i, want := range []string{"injected failure 500", "queued", "policy saw again"} {
		if _, out, _ := post(t, s, "/v1/messages", body("again")); !strings.Contains(out, want) {
			t.Errorf("call %d: %s, want %q", i, out, want)
		}
	}
	s.SetPolicy(nil)
	if _, out, _ := post(t, s, "/v1/messages", body("x")); !strings.Contains(out, "FAKE-ANSWER") {
		t.Fatalf("default policy after SetPolicy(nil): %s", out)
	}
}

// Images in a user turn and in a tool result are recorded in every wire
// format, named by media type and the sha256 of their bytes.
func TestImagesAreRecorded(t *testing.T) {
	const png = "iVBORw0KGgo=" // base64 of the PNG signature
	raw := []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'}
	want := ImageText("image/png", raw)
	for _, c := range []struct{ name, path, body string }{
		{"anthropic", "/v1/messages", `{"model":"claude-x","messages":[
			{"role":"user","content":[{"type":"text","text":"U1"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + png + `"}}]},
			{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Read","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"OUT"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + png + `"}}]}]}]}`},
		{"responses", "/v1/responses", `{"model":"gpt-x","input":[
			{"type":"message","role":"user","content":[{"type":"input_text","text":"U1"},{"type":"input_image","image_url":"data:image/png;base64,` + png + `"}]},
			{"type":"function_call","name":"view_image","arguments":"{}","call_id":"t1"},
			{"type":"function_call_output","call_id":"t1","output":[{"type":"input_text","text":"OUT"},{"type":"input_image","image_url":"data:image/png;base64,` + png + `"}]}]}`},
		{"chat", "/v1/chat/completions", `{"model":"fake-model","messages":[
			{"role":"user","content":[{"type":"text","text":"U1"},{"type":"image_url","image_url":{"url":"data:image/png;base64,` + png + `"}}]},
			{"role":"assistant","tool_calls":[{"id":"t1","type":"function","function":{"name":"read","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"t1","content":[{"type":"text","text":"OUT"},{"type":"image_url","image_url":{"url":"data:image/png;base64,` + png + `"}}]}]}`},
		{"gemini", "/v1beta/models/gem-x:streamGenerateContent?alt=sse", `{"contents":[
			{"role":"user","parts":[{"text":"U1"},{"inlineData":{"mimeType":"image/png","data":"` + png + `"}}]},
			{"role":"model","parts":[{"functionCall":{"id":"t1","name":"read_file","args":{}}}]},
			{"role":"user","parts":[{"functionResponse":{"id":"t1","name":"read_file","response":{"output":"OUT"},"parts":[{"inlineData":{"mimeType":"image/png","data":"` + png + `"}}]}}]}]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := Start(t)
			if status, out, _ := post(t, s, c.path, c.body); status != 200 {
				t.Fatalf("status %d: %s", status, out)
			}
			got := strings.Join(summary(s.Turns()[0].Items), " | ")
			for _, w := range []string{"user:image:" + want, "result:t1 | tool:image:" + want} {
				if !strings.Contains(got, w) {
					t.Errorf("items %q lack %q", got, w)
				}
			}
		})
	}
}

// TestStrictRefusesEmptyText: strict mode answers an empty text block next
// to an image as the real API does (Anthropic, Gemini), and lets OpenAI's
// APIs take it, as they do; lenient mode takes every one.
func TestStrictRefusesEmptyText(t *testing.T) {
	const png = "iVBORw0KGgo="
	for _, c := range []struct {
		name, path, body string
		want             string // "" when accepted; else a substring of the error body
	}{
		{"anthropic", "/v1/messages", `{"model":"claude-x","messages":[
			{"role":"user","content":[{"type":"text","text":""},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + png + `"}}]}]}`,
			`"error":{"message":"messages: text content blocks must be non-empty","type":"invalid_request_error"}`},
		{"anthropic image alone", "/v1/messages", `{"model":"claude-x","messages":[
			{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + png + `"}}]}]}`, ""},
		{"gemini", "/v1beta/models/gem-x:streamGenerateContent?alt=sse", `{"contents":[
			{"role":"user","parts":[{"text":""},{"inlineData":{"mimeType":"image/png","data":"` + png + `"}}]}]}`,
			`"message":"Unable to submit request because it has an empty text parameter.`},
		{"gemini image alone", "/v1beta/models/gem-x:streamGenerateContent?alt=sse", `{"contents":[
			{"role":"user","parts":[{"inlineData":{"mimeType":"image/png","data":"` + png + `"}}]}]}`, ""},
		{"chat", "/v1/chat/completions", `{"model":"fake-model","messages":[
			{"role":"user","content":[{"type":"text","text":""},{"type":"image_url","image_url":{"url":"data:image/png;base64,` + png + `"}}]}]}`, ""},
		{"responses", "/v1/responses", `{"model":"gpt-x","input":[
			{"type":"message","role":"user","content":[{"type":"input_text","text":""},{"type":"input_image","image_url":"data:image/png;base64,` + png + `"}]}]}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := Start(t)
			s.SetStrict(true)
			status, out, _ := post(t, s, c.path, c.body)
			switch {
			case c.want == "" && status != 200:
				t.Fatalf("refused: %d %s", status, out)
			case c.want != "" && (status != 400 || !strings.Contains(out, c.want)):
				t.Fatalf("got %d %s, want 400 with %s", status, out, c.want)
			}
			if c.name == "gemini" && !strings.Contains(out, `"status":"INVALID_ARGUMENT"`) {
				t.Errorf("%s does not name the error as the real API does", out)
			}
			s.SetStrict(false)
			if status, out, _ := post(t, s, c.path, c.body); status != 200 {
				t.Fatalf("lenient mode refused: %d %s", status, out)
			}
		})
	}
}
