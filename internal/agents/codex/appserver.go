package codex

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// AppServer is a running `codex app-server`, spoken to with newline-delimited
// JSON-RPC over its stdin/stdout (Codex does not need the "jsonrpc" field).
type AppServer struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser

	wmu     sync.Mutex // serialises writes to stdin
	emu     sync.Mutex // guards stderr, apart from mu so a chatty server never blocks a send
	mu      sync.Mutex // guards the rest
	nextID  int
	pending map[int]chan rpcReply
	notes   []Notification
	noteC   chan struct{} // closed and replaced whenever notes grows or the server exits
	exited  bool
	stderr  bytes.Buffer
	readErr error
}

// Notification is a message the server sent without an id.
type Notification struct {
	Method string
	Params json.RawMessage
}

// RPCError is an error answer from the server.
type RPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("codex app-server: %s (code %d)", e.Message, e.Code)
}

type rpcReply struct {
	Result json.RawMessage
	Err    *RPCError
}

type wireMsg struct {
	ID     *int            `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *RPCError       `json:"error,omitempty"`
}

// ClientName is how cast introduces itself; Codex records it as the
// thread's originator.
const ClientName = "cast"

// StartAppServer starts `bin app-server` in dir with exactly env (which must
// set CODEX_HOME) and completes the initialize handshake. experimentalApi is
// requested because thread/resume with a path needs it. Close it when done.
func StartAppServer(ctx context.Context, bin string, env []string, dir string) (*AppServer, error) {
	cmd := exec.Command(bin, "app-server")
	cmd.Dir, cmd.Env = dir, env
	// Own process group: the npm launcher spawns the real binary as a child
	// and Close must stop both.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s := &AppServer{cmd: cmd, stdin: stdin, pending: map[int]chan rpcReply{}, noteC: make(chan struct{})}
	cmd.Stderr = &lockedWriter{mu: &s.emu, w: &s.stderr}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go s.read(stdout)
	init := map[string]any{
		"clientInfo":   map[string]any{"name": ClientName, "title": "cast", "version": CLIVersion},
		"capabilities": map[string]any{"experimentalApi": true},
	}
	if err := s.Call(ctx, "initialize", init, nil); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.send(wireMsg{Method: "initialized"}); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w.Len() < 1<<20 { // keep the first MiB for error messages
		l.w.Write(p)
	}
	return len(p), nil
}

// Stderr returns what the server logged so far (for error reports).
func (s *AppServer) Stderr() string {
	s.emu.Lock()
	defer s.emu.Unlock()
	return s.stderr.String()
}

func (s *AppServer) read(r io.Reader) {
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		raw, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(raw)) > 0 {
			s.dispatch(raw)
		}
		if err != nil {
			why := lastLine(s.Stderr())
			s.mu.Lock()
			s.exited, s.readErr = true, err
			for id, c := range s.pending {
				c <- rpcReply{Err: &RPCError{Code: -1, Message: "app-server exited: " + why}}
				delete(s.pending, id)
			}
			close(s.noteC)
			s.noteC = make(chan struct{})
			s.mu.Unlock()
			return
		}
	}
}

func (s *AppServer) dispatch(raw []byte) {
	var m wireMsg
	if json.Unmarshal(raw, &m) != nil {
		return // not protocol (a stray log line)
	}
	switch {
	case m.ID != nil && m.Method == "":
		s.mu.Lock()
		c := s.pending[*m.ID]
		delete(s.pending, *m.ID)
		s.mu.Unlock()
		if c != nil {
			c <- rpcReply{Result: m.Result, Err: m.Error}
		}
	case m.ID != nil:
		// A request from the server (approval, user input). cast drives
		// imports with approvals off; answering keeps the turn from
		// waiting forever if one arrives anyway.
		_ = s.send(wireMsg{ID: m.ID, Error: &RPCError{Code: -32601, Message: "cast does not handle " + m.Method}})
	default:
		s.mu.Lock()
		s.notes = append(s.notes, Notification{Method: m.Method, Params: m.Params})
		close(s.noteC)
		s.noteC = make(chan struct{})
		s.mu.Unlock()
	}
}

func (s *AppServer) send(m wireMsg) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, err = s.stdin.Write(append(b, '\n'))
	return err
}

// Call sends a request and decodes its result into out (nil to ignore).
func (s *AppServer) Call(ctx context.Context, method string, params, out any) error {
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	c := make(chan rpcReply, 1)
	s.mu.Lock()
	if s.exited {
		s.mu.Unlock()
		return fmt.Errorf("codex app-server has exited: %s", lastLine(s.Stderr()))
	}
	s.nextID++
	id := s.nextID
	s.pending[id] = c
	s.mu.Unlock()
	if err := s.send(wireMsg{ID: &id, Method: method, Params: p}); err != nil {
		return s.sendFailed(ctx, method, id, c, err)
	}
	select {
	case r := <-c:
		if r.Err != nil {
			return fmt.Errorf("%s: %w", method, r.Err)
		}
		if out != nil && len(r.Result) > 0 {
			return json.Unmarshal(r.Result, out)
		}
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
		return fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// sendFailed reports a request that could not be written. A write fails
// (EPIPE) when the server closed its stdin, which it does by exiting; the
// reader then fails every pending call with the exit and the server's last
// words. Waiting for that answer, instead of returning whichever of the two
// errors came first, makes the outcome the same every time.
func (s *AppServer) sendFailed(ctx context.Context, method string, id int, c chan rpcReply, werr error) error {
	select {
	case r := <-c:
		if r.Err != nil {
			return fmt.Errorf("%s: %w", method, r.Err)
		}
	case <-ctx.Done():
		s.mu.Lock()
		delete(s.pending, id)
		s.mu.Unlock()
	}
	return fmt.Errorf("%s: write to codex app-server: %w", method, werr)
}

// WaitFor returns the first notification at or after index from whose method
// is method and that match accepts, and the index after it.
func (s *AppServer) WaitFor(ctx context.Context, from int, method string, match func(json.RawMessage) bool) (Notification, int, error) {
	for {
		s.mu.Lock()
		for i := from; i < len(s.notes); i++ {
			if n := s.notes[i]; n.Method == method && (match == nil || match(n.Params)) {
				s.mu.Unlock()
				return n, i + 1, nil
			}
		}
		from = len(s.notes)
		c, exited := s.noteC, s.exited
		s.mu.Unlock()
		if exited {
			return Notification{}, from, fmt.Errorf("codex app-server exited while waiting for %s: %s", method, lastLine(s.Stderr()))
		}
		select {
		case <-c:
		case <-ctx.Done():
			return Notification{}, from, fmt.Errorf("waiting for %s: %w", method, ctx.Err())
		}
	}
}

// Mark is the index a later WaitFor starts from to see only newer
// notifications.
func (s *AppServer) Mark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.notes)
}

// Close ends the server: stdin closes (the server exits on EOF), and the
// whole process group is killed if it is still there after 5 s.
func (s *AppServer) Close() error {
	_ = s.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- s.cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		err = <-done
	}
	// Helpers the server started may outlive it.
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return nil // killed or exited non-zero after EOF: not a failure of the import
	}
	return err
}

func lastLine(s string) string {
	s = string(bytes.TrimSpace([]byte(s)))
	if i := bytes.LastIndexByte([]byte(s), '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
