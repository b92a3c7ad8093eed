package agents

import (
	"fmt"
	"strings"
)

// Codec is an agent's native format as its package registers it
// (RegisterCodec): its reader and, where cast can write the format, a way
// to make its writer.
type Codec struct {
	Reader Reader
	// NewWriter makes the writer; bin and env are the agent's CLI and its
	// environment, for a writer that runs it (OpenCode loads sessions with
	// `opencode import`). Nil: cast cannot write the format.
	NewWriter func(bin string, env []string) (Writer, error)
}

var codecs = map[string]Codec{}

// RegisterCodec makes c the codec of the registered agent name; agent
// packages without a driver call it from init (Register takes a driver's
// codec with it). It panics on an unknown name or a second codec.
func RegisterCodec(name string, c Codec) { register(codecs, "codec", name, c) }

// ReaderFor is the native reader of agent.
func ReaderFor(agent string) (Reader, error) {
	driversMu.RLock()
	c, ok := codecs[agent]
	driversMu.RUnlock()
	if !ok || c.Reader == nil {
		return nil, noCodec(agent, "read")
	}
	return c.Reader, nil
}

// WriterFor is the native writer of agent; bin and env as Codec.NewWriter.
func WriterFor(agent, bin string, env []string) (Writer, error) {
	driversMu.RLock()
	c, ok := codecs[agent]
	driversMu.RUnlock()
	if !ok || c.NewWriter == nil {
		return nil, noCodec(agent, "write")
	}
	w, err := c.NewWriter(bin, env)
	if err != nil {
		return nil, err
	}
	return sinceCompaction{w}, nil
}

func noCodec(agent, verb string) error {
	a, ok := Lookup(agent)
	if !ok {
		return fmt.Errorf("unknown agent %q; use one of %s", agent, strings.Join(Names(), ", "))
	}
	return fmt.Errorf("cast cannot %s %s transcripts: %s sessions do not take over history", verb, a.DisplayName, a.DisplayName)
}

// FileCodec is the codec of a format cast reads with r and writes with w,
// a writer that needs no CLI (it writes the agent's files itself).
func FileCodec(r Reader, w Writer) Codec {
	return Codec{Reader: r, NewWriter: func(string, []string) (Writer, error) { return w, nil }}
}

// ReadableAgents lists the agents whose native sessions cast reads (a
// codec with a reader), sorted.
func ReadableAgents() []string {
	return codecAgents(func(c Codec) bool { return c.Reader != nil })
}

// WritableAgents lists the agents cast writes native sessions for (a
// codec with a writer), sorted.
func WritableAgents() []string {
	return codecAgents(func(c Codec) bool { return c.NewWriter != nil })
}

func codecAgents(has func(Codec) bool) []string {
	driversMu.RLock()
	defer driversMu.RUnlock()
	var out []string
	for _, n := range Names() {
		if c, ok := codecs[n]; ok && has(c) {
			out = append(out, n)
		}
	}
	return out
}
