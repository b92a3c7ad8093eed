package testharness

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

// FrameConn carries many gRPC streams (WatchSession watches, or the
// streams Open starts) over one plaintext HTTP/2 connection and reads
// their frames itself: one goroutine a connection, no goroutine, receive
// buffer or decoded message a stream. It is the benchmarks' thin client
// (the fan-out's watchers, the fleet simulator's nodes): the streams' clients share the
// benchmark machine's cores with the control plane, and a gRPC client
// stream costs more CPU to receive a message (a goroutine woken, the
// message decoded) than the server spends sending it, so with gRPC
// clients the benchmark measures them as much as the server. What a
// FrameConn reports is when each message's bytes were read off the
// connection.
type FrameConn struct {
	conn   net.Conn
	fr     *http2.Framer
	token  string
	onSeq  func(watch int, seq int64, at time.Time)
	wmu    sync.Mutex // the framer's writes, the header encoder and next
	hbuf   bytes.Buffer
	henc   *hpack.Encoder
	next   uint32
	mu     sync.Mutex
	stream map[uint32]*frameStream
	done   chan struct{}
	err    error // why the reader stopped; read after done
}

// frameStream is one call: what it does with each whole message (nil:
// nothing), the bytes of a message not yet whole, and for a watch, whether
// its first event (the session: the stream is open) has come.
type frameStream struct {
	onMsg    func(msg []byte, at time.Time)
	buf      []byte
	open     chan error // a watch's; nil for a stream that waits for nothing
	opened   bool
	unacked  int // bytes received since the last window update
	finished bool
}

// frameWindow is the flow-control window the client grants, per stream
// and for the connection; it tops a window up once half is used.
const frameWindow = 1 << 30

// Message seq's place in the wire form: WatchSessionResponse.message,
// then Message.seq (from the generated descriptors, not numbers written
// here).
var (
	eventMessageField = (&castv1.WatchSessionResponse{}).ProtoReflect().Descriptor().Fields().ByName("message").Number()
	messageSeqField   = (&castv1.Message{}).ProtoReflect().Descriptor().Fields().ByName("seq").Number()
)

// DialFrames connects to a plaintext control plane at addr, presenting
// token on every stream; onSeq is called, from the connection's reader,
// with each appended message's seq on a watch and when its bytes were
// read (the first event of a watch, the session, is not passed on); nil
// lets the watches' messages go.
func DialFrames(addr, token string, onSeq func(watch int, seq int64, at time.Time)) (*FrameConn, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &FrameConn{conn: conn, fr: http2.NewFramer(conn, conn), token: token, onSeq: onSeq,
		next: 1, stream: map[uint32]*frameStream{}, done: make(chan struct{})}
	c.henc = hpack.NewEncoder(&c.hbuf)
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = 1 << 20
	c.wmu.Lock()
	err = c.handshake()
	c.wmu.Unlock()
	if err != nil {
		conn.Close()
		return nil, err
	}
	go c.read()
	return c, nil
}

func (c *FrameConn) handshake() error {
	if _, err := c.conn.Write([]byte(http2.ClientPreface)); err != nil {
		return err
	}
	if err := c.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: frameWindow}); err != nil {
		return err
	}
	return c.fr.WriteWindowUpdate(0, frameWindow)
}

// Close ends the connection and waits for its reader.
func (c *FrameConn) Close() error {
	err := c.conn.Close()
	<-c.done
	return err
}

// Watch opens WatchSession(req) as watch number watch and waits for its
// first event; a stream the server ends or refuses returns its status.
func (c *FrameConn) Watch(watch int, req *castv1.WatchSessionRequest) error {
	st := &frameStream{open: make(chan error, 1)}
	if c.onSeq != nil {
		st.onMsg = func(msg []byte, at time.Time) {
			if seq, ok := appendedSeq(msg); ok {
				c.onSeq(watch, seq, at)
			}
		}
	}
	if _, err := c.start("/"+castv1.SessionService_ServiceDesc.ServiceName+"/WatchSession", req, st, true); err != nil {
		return err
	}
	select {
	case err := <-st.open:
		return err
	case <-c.done:
		return fmt.Errorf("connection ended: %w", c.err)
	}
}

// Open starts a call of a client or bidirectional stream method (such as
// "/cast.v1.NodeService/Connect") with its first message, and returns the
// stream's id for Send. What the server sends on it is read and let go.
func (c *FrameConn) Open(method string, first proto.Message) (uint32, error) {
	return c.start(method, first, &frameStream{}, false)
}

// Send sends one more message on stream id (from Open).
func (c *FrameConn) Send(id uint32, m proto.Message) error {
	msg, err := grpcMessage(m)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.fr.WriteData(id, false, msg)
}

// start opens a stream for st and sends its call's headers and first
// message (the last the client sends when end is set).
func (c *FrameConn) start(method string, first proto.Message, st *frameStream, end bool) (uint32, error) {
	msg, err := grpcMessage(first)
	if err != nil {
		return 0, err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	id := c.next
	c.next += 2
	c.mu.Lock()
	c.stream[id] = st
	c.mu.Unlock()
	c.hbuf.Reset()
	for _, f := range [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":authority", c.conn.RemoteAddr().String()}, {":path", method},
		{"content-type", "application/grpc"}, {"te", "trailers"}, {"authorization", "Bearer " + c.token},
	} {
		if err := c.henc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}); err != nil {
			return 0, err
		}
	}
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hbuf.Bytes(), EndHeaders: true}); err != nil {
		return 0, err
	}
	return id, c.fr.WriteData(id, end, msg)
}

// grpcMessage is m as gRPC frames a message: uncompressed, its length
// first, marshalled in place after the 5-byte prefix.
func grpcMessage(m proto.Message) ([]byte, error) {
	msg, err := proto.MarshalOptions{}.MarshalAppend(make([]byte, 5, 5+proto.Size(m)), m)
	if err != nil {
		return nil, err
	}
	binary.BigEndian.PutUint32(msg[1:5], uint32(len(msg)-5))
	return msg, nil
}

// read handles the connection's frames until it ends.
func (c *FrameConn) read() {
	defer close(c.done)
	unacked := 0
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			c.err = err
			c.endAll(err)
			return
		}
		switch f := f.(type) {
		case *http2.DataFrame:
			at := time.Now()
			unacked += len(f.Data())
			if unacked > frameWindow/2 {
				c.write(func() error { return c.fr.WriteWindowUpdate(0, uint32(unacked)) })
				unacked = 0
			}
			c.data(f, at)
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				c.end(f.StreamID, callStatus(f))
			}
		case *http2.RSTStreamFrame:
			c.end(f.StreamID, fmt.Errorf("stream reset: %v", f.ErrCode))
		case *http2.SettingsFrame:
			if !f.IsAck() {
				c.write(c.fr.WriteSettingsAck)
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				c.write(func() error { return c.fr.WritePing(true, f.Data) })
			}
		case *http2.GoAwayFrame:
			c.err = fmt.Errorf("goaway: %v", f.ErrCode)
			c.endAll(c.err)
			return
		}
	}
}

func (c *FrameConn) write(fn func() error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = fn() // a failed write ends the connection, which the reader sees
}

// data takes one DATA frame's bytes: each whole gRPC message in them is
// an event of the stream.
func (c *FrameConn) data(f *http2.DataFrame, at time.Time) {
	c.mu.Lock()
	st := c.stream[f.StreamID]
	c.mu.Unlock()
	if st == nil || st.finished {
		return
	}
	st.buf = append(st.buf, f.Data()...)
	if st.unacked += len(f.Data()); st.unacked > frameWindow/2 {
		n := st.unacked
		c.write(func() error { return c.fr.WriteWindowUpdate(f.StreamID, uint32(n)) })
		st.unacked = 0
	}
	for len(st.buf) >= 5 {
		n := int(binary.BigEndian.Uint32(st.buf[1:5]))
		if len(st.buf) < 5+n {
			break
		}
		c.event(st, st.buf[5:5+n], at)
		st.buf = st.buf[5+n:]
	}
	if len(st.buf) == 0 {
		st.buf = nil // let a long run's bytes go
	}
}

func (c *FrameConn) event(st *frameStream, msg []byte, at time.Time) {
	if st.open != nil && !st.opened {
		st.opened = true
		st.open <- nil
		return
	}
	if st.onMsg != nil {
		st.onMsg(msg, at)
	}
}

// end finishes a stream: a watch still opening gets err.
func (c *FrameConn) end(id uint32, err error) {
	c.mu.Lock()
	st := c.stream[id]
	delete(c.stream, id)
	c.mu.Unlock()
	if st != nil && st.open != nil && !st.opened {
		st.opened = true
		st.open <- err
	}
	if st != nil {
		st.finished = true
	}
}

func (c *FrameConn) endAll(err error) {
	c.mu.Lock()
	ids := make([]uint32, 0, len(c.stream))
	for id := range c.stream {
		ids = append(ids, id)
	}
	c.mu.Unlock()
	for _, id := range ids {
		c.end(id, err)
	}
}

// callStatus is a stream's end from its trailers: nil for OK.
func callStatus(f *http2.MetaHeadersFrame) error {
	code, msg := f.PseudoValue("status"), ""
	for _, h := range f.RegularFields() {
		switch h.Name {
		case "grpc-status":
			code = h.Value
		case "grpc-message":
			msg = h.Value
		}
	}
	if n, err := strconv.Atoi(code); err == nil && n == 0 {
		return nil
	}
	return fmt.Errorf("stream ended: grpc-status %s %s", code, msg)
}

// appendedSeq reads the seq of a WatchSessionResponse carrying an
// appended message from its wire form, decoding nothing else.
func appendedSeq(b []byte) (int64, bool) {
	inner, ok := field(b, eventMessageField, protowire.BytesType)
	if !ok {
		return 0, false
	}
	v, ok := field(inner, messageSeqField, protowire.VarintType)
	if !ok {
		return 0, false
	}
	seq, n := protowire.ConsumeVarint(v)
	return int64(seq), n > 0
}

// field returns the value bytes of the first field num of type typ in b
// (for a varint, the bytes from its start).
func field(b []byte, num protowire.Number, typ protowire.Type) ([]byte, bool) {
	for len(b) > 0 {
		n, t, l := protowire.ConsumeTag(b)
		if l < 0 {
			return nil, false
		}
		b = b[l:]
		if n == num && t == typ {
			if typ == protowire.BytesType {
				v, l := protowire.ConsumeBytes(b)
				return v, l >= 0
			}
			return b, true
		}
		l = protowire.ConsumeFieldValue(n, t, b)
		if l < 0 {
			return nil, false
		}
		b = b[l:]
	}
	return nil, false
}
