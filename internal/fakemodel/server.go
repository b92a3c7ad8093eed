// Package fakemodel is an in-process fake model server for the tests and
// the canaries (internal/canary) that drive the real agent CLIs. It
// listens on 127.0.0.1 only, speaks the four wire protocols the pinned CLIs
// use (Anthropic Messages, OpenAI Responses, OpenAI Chat Completions,
// Gemini), records every request with a normalized view of the
// conversation the model received, and answers by a scriptable policy.
package fakemodel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// API names a wire protocol.
type API string

const (
	Anthropic API = "anthropic" // POST /v1/messages (+ /count_tokens)
	Responses API = "responses" // POST /v1/responses (codex)
	Chat      API = "chat"      // POST /v1/chat/completions (pi, opencode, grok)
	Gemini    API = "gemini"    // POST /v1beta/models/<m>:{streamGenerateContent,generateContent,countTokens}
)

// Request is one recorded HTTP request.
type Request struct {
	API    API // "" for paths the fake does not serve (answered 404)
	Method string
	Path   string
	Query  string
	Header http.Header
	Body   []byte
	Model  string
	Stream bool
	// Side is true for calls that are not a conversation turn: token
	// counting, JSON-mode helper calls (gemini's router) and gemini's
	// non-streaming generateContent (router, session summary). Scripted
	// replies and injected failures apply to non-side calls only.
	Side bool
	// Items is the conversation as the model received it, in order:
	// system prompt(s), user and assistant text, thinking, tool calls and
	// tool results, from whichever wire format the request used.
	Items []Item
	// Status is what the fake answered.
	Status int
}

// Item is one normalized conversation element.
type Item struct {
	Role       string // system | user | assistant | tool
	Kind       string // text | thinking | tool_call | tool_result
	Text       string // text, thinking, or a tool result's output
	ToolName   string // tool_call (and tool_result where the wire names it)
	ToolCallID string // tool_call and tool_result
	ToolInput  string // tool_call: JSON arguments as sent
	IsError    bool   // tool_result flagged as an error
}

func (it Item) String() string {
	switch it.Kind {
	case KindToolCall:
		return fmt.Sprintf("%s tool_call %s(%s) id=%s", it.Role, it.ToolName, it.ToolInput, it.ToolCallID)
	case KindToolResult:
		return fmt.Sprintf("%s tool_result id=%s %q", it.Role, it.ToolCallID, it.Text)
	case KindImage:
		return fmt.Sprintf("%s image %s", it.Role, it.Text)
	}
	return fmt.Sprintf("%s %s %q", it.Role, it.Kind, it.Text)
}

// Item kinds.
const (
	KindText       = "text"
	KindThinking   = "thinking"
	KindToolCall   = "tool_call"
	KindToolResult = "tool_result"
	// KindImage is an image the request carries; Text names it by media
	// type and the sha256 of its bytes (imageText), so a test matches the
	// very image it sent.
	KindImage = "image"
)

// Server is a running fake. All methods are safe for concurrent use.
type Server struct {
	// URL is the base URL (http://127.0.0.1:port, no path). Point
	// ANTHROPIC_BASE_URL and GOOGLE_GEMINI_BASE_URL at it and OpenAI-style
	// clients at URL+"/v1".
	URL string

	srv   *http.Server
	ln    net.Listener
	mu    sync.Mutex
	reqs  []Request
	queue []Reply
	fails []int // statuses for the next non-side calls
	// rejects: a credential (substring of x-api-key or Authorization) to
	// the status every conversation turn carrying it gets.
	rejects map[string]int
	hdr     http.Header
	turns   int
	strict  bool
	// encrypted: Responses answers carry reasoning sealed to the
	// credential (reasoning.go).
	encrypted bool
	// policy answers the turns nothing else answers (SetPolicy).
	policy func(Request) Reply
}

// New starts a fake on a free loopback port. Call Close when done.
func New() (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{URL: "http://" + ln.Addr().String(), ln: ln, hdr: http.Header{}}
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve)}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Start is New for tests: it fails t on error and closes on cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := New()
	if err != nil {
		t.Fatalf("fakemodel: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// Close stops the server and drops open connections.
func (s *Server) Close() { _ = s.srv.Close() }

// Requests returns a copy of everything recorded so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Turns returns the recorded conversation turns: requests that are not side
// calls and were served by a known API.
func (s *Server) Turns() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if r.API != "" && !r.Side {
			out = append(out, r)
		}
	}
	return out
}

// TurnsStarted counts conversation turns received so far, including ones
// still being answered (Turns records a request once it is answered, and a
// delayed reply can take long).
func (s *Server) TurnsStarted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.turns
}

// Reset forgets recorded requests (queued replies and failures stay).
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = nil
}

// Enqueue scripts the replies to the next conversation turns, in order. When
// the queue is empty the default policy answers (see Reply).
func (s *Server) Enqueue(r ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, r...)
}

// FailNext makes the next n conversation turns fail with HTTP status (429
// carries Retry-After: 0 so clients retry at once).
func (s *Server) FailNext(n, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for range n {
		s.fails = append(s.fails, status)
	}
}

// RejectCredential makes every conversation turn sent with a credential
// containing token (x-api-key or Authorization) fail with status, as a
// provider does for an account over its usage limit (429); status 0 lifts
// it. Other credentials are served as usual.
func (s *Server) RejectCredential(token string, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rejects == nil {
		s.rejects = map[string]int{}
	}
	if status == 0 {
		delete(s.rejects, token)
		return
	}
	s.rejects[token] = status
}

func (s *Server) rejected(h http.Header) int {
	cred := h.Get("x-api-key") + " " + h.Get("Authorization") + " " + h.Get("x-goog-api-key")
	for tok, st := range s.rejects {
		if strings.Contains(cred, tok) {
			return st
		}
	}
	return 0
}

// SetStrict makes the fake reject (400, as the real APIs do) a turn whose
// history has a tool result without an earlier call or a call whose result
// is missing before the next assistant message, or (Anthropic and Gemini)
// an empty text block (emptytext.go). Clients pass some broken histories
// through unrepaired; strict mode catches that.
func (s *Server) SetStrict(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.strict = on
}

// SetPolicy makes policy answer every conversation turn that no queued
// reply, injected failure or rejected credential answers, instead of the
// default policy. A test running several sessions at once decides per
// request (a Gate to hold one session's turn mid-way, answers that do not
// quote the prompt); Enqueue's one queue cannot say which session's turn
// takes a reply. policy runs as the request arrives, outside the fake's
// lock, with the request's normalized Items; nil restores the default.
func (s *Server) SetPolicy(policy func(Request) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.policy = policy
}

// SetHeader adds a response header to every answer (rate-limit headers, for
// instance).
func (s *Server) SetHeader(key, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hdr.Set(key, value)
}

// serve answers one request and records it with what it was answered.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	req, rt, in, err := readRequest(r)
	if err != nil {
		s.refuse(w, req, http.StatusBadRequest, "fakemodel: body is not JSON: "+err.Error())
		return
	}
	v := s.decide(w, r.Header, rt, req)
	if msg := refusal(v, rt, req, in, r.Header); msg != "" {
		s.refuse(w, req, http.StatusBadRequest, msg)
		return
	}
	if !hold(r.Context(), v.reply) {
		req.Status = 499 // the client gave up first
		s.record(req)
		return
	}

	switch {
	case rt.api == "":
		req.Status = http.StatusNotFound
		s.record(req)
		http.NotFound(w, r)
		return
	case !v.served():
		s.refuse(w, req, v.status, fmt.Sprintf("fakemodel: injected failure %d", v.status))
		return
	}
	req.Status = http.StatusOK
	s.record(req)
	if req.Side {
		serveSide(w, rt, req, in)
		return
	}
	answer(w, r.Header, req, rt, in, v)
}

// readRequest is r as the fake records it, and in its JSON body (nil
// on a path no API serves); the error is a body that is not JSON.
func readRequest(r *http.Request) (req Request, rt routeInfo, in map[string]any, err error) {
	body, _ := io.ReadAll(r.Body)
	req = Request{
		Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
		Header: r.Header.Clone(), Body: body,
	}
	rt = route(r.Method, r.URL.Path, r.URL.Query().Get("alt"))
	req.API, req.Stream, req.Side = rt.api, rt.stream, rt.side
	if rt.api == "" {
		return req, rt, nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(&in); err != nil {
		return req, rt, nil, err
	}
	req.Items = normalize(rt.api, in)
	req.Model = modelOf(rt, in)
	if rt.api != Gemini {
		req.Stream, _ = in["stream"].(bool)
	}
	if jsonMode(in) || helperCall(req.Items) {
		req.Side = true
	}
	return req, rt, in, nil
}

// verdict is how serve answers a request, decided as it arrives.
type verdict struct {
	status    int // an injected failure, unless 0 or 200
	reply     Reply
	turn      int // the conversation turns started so far
	strict    bool
	encrypted bool // the answer carries reasoning sealed to the credential
}

// served is whether the request is answered, not failed as injected.
func (v verdict) served() bool { return v.status == 0 || v.status == http.StatusOK }

// decide sets the fake's headers on w and takes what answers the request:
// a conversation turn is answered by, first, a rejected credential, then
// an injected failure, a queued reply, the policy, the default reply.
func (s *Server) decide(w http.ResponseWriter, h http.Header, rt routeInfo, req Request) verdict {
	var v verdict
	var policy func(Request) Reply
	s.mu.Lock()
	for k, vs := range s.hdr {
		w.Header()[k] = append([]string(nil), vs...)
	}
	if rt.api != "" && !req.Side {
		s.turns++
		switch {
		case s.rejected(h) != 0:
			v.status = s.rejected(h)
		case len(s.fails) > 0:
			v.status, s.fails = s.fails[0], s.fails[1:]
		case len(s.queue) > 0:
			v.reply, s.queue = s.queue[0], s.queue[1:]
			v.status = v.reply.Status
		case s.policy != nil:
			policy = s.policy
		default:
			v.reply = defaultReply(req.Items, s.turns)
		}
	}
	v.turn = s.turns
	v.strict = s.strict
	v.encrypted = s.encrypted && rt.api == Responses && !req.Side
	s.mu.Unlock()
	if policy != nil { // outside the lock, as SetPolicy documents
		v.reply = policy(req)
		v.status = v.reply.Status
	}
	return v
}

// refusal is the message of the 400 a real API would answer a turn that
// is to be served with: reasoning sealed to another account, or (strict)
// a broken history; "" when there is none.
func refusal(v verdict, rt routeInfo, req Request, in map[string]any, h http.Header) string {
	if !v.served() {
		return ""
	}
	if v.encrypted {
		if enc := foreignSeal(in, h); enc != "" {
			return "fakemodel: the encrypted content " + enc + " could not be verified (sealed to another account)"
		}
	}
	if v.strict && rt.api != "" && !req.Side {
		if err := checkPairs(req.Items); err != nil {
			return "fakemodel (strict): " + err.Error()
		}
		return emptyText(rt.api, in)
	}
	return ""
}

// refuse records req as answered with status and writes the error.
func (s *Server) refuse(w http.ResponseWriter, req Request, status int, msg string) {
	req.Status = status
	s.record(req)
	writeError(w, req.API, status, msg)
}

// hold waits out reply's Delay, or for its Gate; false when the client
// gave up first.
func hold(ctx context.Context, reply Reply) bool {
	if reply.Delay <= 0 && reply.Gate == nil {
		return true
	}
	var timer <-chan time.Time
	if reply.Delay > 0 {
		timer = time.After(reply.Delay)
	}
	select {
	case <-timer:
	case <-reply.Gate:
	case <-ctx.Done():
		return false
	}
	return true
}

// answer writes the turn's reply in the wire format of rt's API.
func answer(w http.ResponseWriter, h http.Header, req Request, rt routeInfo, in map[string]any, v verdict) {
	reply := v.reply.resolve(in, rt.api, req.Items, v.turn)
	id := fmt.Sprintf("%06d", v.turn)
	if v.encrypted {
		reply.reasoning = reasoningItem(id, v.turn, credentialOf(h))
	}
	switch rt.api {
	case Anthropic:
		serveAnthropic(w, req, reply, id)
	case Responses:
		serveResponses(w, req, reply, id)
	case Chat:
		serveChat(w, req, reply, id, in)
	case Gemini:
		serveGemini(w, req, reply)
	}
}

func (s *Server) record(r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, r)
}

type routeInfo struct {
	api    API
	stream bool
	side   bool
	model  string // from the path (gemini)
	count  bool   // a token-count call
}

// route maps a request to an API by path suffix, so any base path prefix a
// client adds (/v1, /api/v1, ...) still works.
func route(method, path, alt string) routeInfo {
	if method != http.MethodPost {
		return routeInfo{}
	}
	switch {
	case strings.HasSuffix(path, "/messages/count_tokens"):
		return routeInfo{api: Anthropic, side: true, count: true}
	case strings.HasSuffix(path, "/messages"):
		return routeInfo{api: Anthropic}
	case strings.HasSuffix(path, "/responses"):
		return routeInfo{api: Responses}
	case strings.HasSuffix(path, "/chat/completions"):
		return routeInfo{api: Chat}
	}
	i := strings.LastIndex(path, "/models/")
	if i < 0 {
		return routeInfo{}
	}
	model, method2, ok := strings.Cut(path[i+len("/models/"):], ":")
	if !ok {
		return routeInfo{}
	}
	switch method2 {
	case "streamGenerateContent":
		// Without alt=sse the answer is one JSON array, not an event stream.
		return routeInfo{api: Gemini, model: model, stream: alt == "sse"}
	case "generateContent":
		return routeInfo{api: Gemini, model: model, side: true}
	case "countTokens":
		return routeInfo{api: Gemini, model: model, side: true, count: true}
	}
	return routeInfo{}
}

func modelOf(rt routeInfo, in map[string]any) string {
	if rt.model != "" {
		return rt.model
	}
	m, _ := in["model"].(string)
	return m
}

// helperPrompts open the system prompts of helper calls a CLI makes besides
// the conversation turn (opencode titles every new session with its small
// model). Treating them as turns would shift scripted replies and failures.
var helperPrompts = []string{"You are a title generator"}

func helperCall(items []Item) bool {
	for _, it := range items {
		if it.Role != "system" {
			return false
		}
		for _, p := range helperPrompts {
			if strings.HasPrefix(strings.TrimSpace(it.Text), p) {
				return true
			}
		}
	}
	return false
}

// jsonMode reports a structured-output helper call (gemini's router asks for
// a JSON object matching a schema); it is answered from the schema.
func jsonMode(in map[string]any) bool {
	gc, _ := in["generationConfig"].(map[string]any)
	if gc == nil {
		return false
	}
	return gc["responseJsonSchema"] != nil || gc["responseSchema"] != nil
}
