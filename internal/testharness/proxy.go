package testharness

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Direction selects which way bytes stop flowing through a Proxy.
type Direction int

// Directions: ToTarget is client → target, FromTarget the answers.
const (
	ToTarget Direction = 1 << iota
	FromTarget
	Both = ToTarget | FromTarget
)

// Proxy is a TCP proxy on loopback between a client and target that
// injects network faults: latency on every chunk, and a blackhole that
// stops moving bytes one or both ways while every connection stays open,
// so neither end sees a reset (a partition with half-open streams). New
// connections during a blackhole are accepted and held, like a SYN that
// is retransmitted until the network heals.
type Proxy struct {
	Addr string // dial this instead of the target

	target string
	ln     net.Listener

	mu      sync.Mutex
	latency time.Duration
	held    Direction     // directions that are blackholed
	healed  chan struct{} // closed and replaced whenever held or latency change
	conns   map[net.Conn]struct{}
	dialed  int // connections accepted from clients
	closed  bool
	wg      sync.WaitGroup
}

// StartProxy proxies a new loopback port to target until the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, healed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// SetLatency delays every chunk by d in each direction (a slow link or a
// slow disk behind it); 0 removes it.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = d
	p.changed()
}

// Blackhole stops bytes flowing in dir; connections stay open.
func (p *Proxy) Blackhole(dir Direction) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = dir
	p.changed()
}

// Heal lets bytes flow again; what was held is delivered, in order, as TCP
// delivers it after a partition that did not outlast the connection.
func (p *Proxy) Heal() { p.Blackhole(0) }

// Reset closes every open connection (both ends see a reset); the
// listener keeps accepting.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

// Accepted is how many connections clients have opened so far (a client
// that redials during a blackhole is counted, though its connection is
// held).
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dialed
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
	p.changed()
	p.mu.Unlock()
	p.wg.Wait()
}

// changed wakes everything waiting on the fault settings; p.mu is held.
func (p *Proxy) changed() {
	close(p.healed)
	p.healed = make(chan struct{})
}

// pass waits until dir flows and returns the latency to apply; false once
// the proxy is closed.
func (p *Proxy) pass(dir Direction) (time.Duration, bool) {
	for {
		p.mu.Lock()
		held, lat, wake, closed := p.held&dir != 0, p.latency, p.healed, p.closed
		p.mu.Unlock()
		if closed {
			return 0, false
		}
		if !held {
			return lat, true
		}
		<-wake
	}
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
	c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		p.mu.Lock()
		p.dialed++
		p.mu.Unlock()
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve connects c to the target once the way there is open (a held
// connection waits, as its SYN would) and copies both ways.
func (p *Proxy) serve(c net.Conn) {
	defer p.wg.Done()
	defer p.untrack(c)
	if _, ok := p.pass(ToTarget); !ok {
		return
	}
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(up) {
		return
	}
	defer p.untrack(up)
	done := make(chan struct{}, 2)
	go func() { p.copy(up, c, ToTarget); done <- struct{}{} }()
	go func() { p.copy(c, up, FromTarget); done <- struct{}{} }()
	<-done // one side ended: end both (the deferred untracks close them)
}

// copy moves bytes from src to dst: each chunk is held while dir is
// blackholed and delivered lat after it was read. Latency is pipelined
// (chunks in flight overlap, as on a long link), so it slows every round
// trip without throttling the connection. A held direction stops reading,
// so the sender's socket buffers fill as they would behind a partition.
func (p *Proxy) copy(dst, src net.Conn, dir Direction) {
	type chunk struct {
		b  []byte
		at time.Time
	}
	q := make(chan chunk, 256)
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for c := range q {
			lat, ok := p.pass(dir)
			if !ok {
				return
			}
			if d := time.Until(c.at.Add(lat)); d > 0 {
				time.Sleep(d) // the injected latency itself, not a synchronisation
			}
			if _, err := dst.Write(c.b); err != nil {
				return
			}
		}
	}()
	defer func() { close(q); <-wrote }()
	for {
		if _, ok := p.pass(dir); !ok {
			return
		}
		buf := make([]byte, 32<<10)
		n, err := src.Read(buf)
		if n > 0 {
			select {
			case q <- chunk{b: buf[:n], at: time.Now()}:
			case <-wrote: // dst is gone
				return
			}
		}
		if err != nil {
			return // EOF or a reset: serve closes both ends
		}
	}
}
