package adopt

import (
	"os"
	"path/filepath"

	"github.com/cast-dev/cast/internal/agents"
	"github.com/cast-dev/cast/internal/transcript"
)

// Batches stay well under the control plane's request size (or under
// what the sink learned it to be: Sink.MaxBatchBytes).
const (
	batchMsgs  = 500
	batchBytes = 4 << 20
)

// driver is agent's driver (false when it has none here).
func driver(agent string) (agents.Driver, bool) {
	a, _ := agents.Lookup(agent)
	return a.Driver()
}

// nativeID is the agent's own id of the session in path.
func nativeID(agent, path string) string {
	if d, ok := driver(agent); ok {
		if id := d.SessionID(path); id != "" {
			return id
		}
	}
	return filepath.Base(path)
}

// cwdOf is the folder the native session ran in, where its format says.
func cwdOf(agent, path string) string {
	r, err := agents.ReaderFor(agent)
	if err != nil {
		return ""
	}
	if cr, ok := r.(agents.CwdReader); ok {
		if dir, err := cr.ReadCwd(path); err == nil && filepath.IsAbs(dir) {
			return filepath.Clean(dir)
		}
	}
	return ""
}

// subagentOf is what the subagent's run path holds says of its parent
// (zero for a session of its own).
func subagentOf(agent, path string) agents.Subagent {
	r, err := agents.ReaderFor(agent)
	if err != nil {
		return agents.Subagent{}
	}
	sub, ok, err := agents.ReadSubagent(r, path)
	if err != nil || !ok {
		return agents.Subagent{}
	}
	return sub
}

// title is what the first user message says, else the file's name.
func title(msgs []transcript.Message, path string) string {
	if t := agents.Title(msgs, 60); t != "" {
		return t
	}
	return "adopted " + filepath.Base(path)
}

// readBytes reads data (a prefix of a native file) with agent's reader,
// which reads files.
func readBytes(st *states, agent string, data []byte) ([]transcript.Message, error) {
	r, err := agents.ReaderFor(agent)
	if err != nil {
		return nil, err
	}
	f, err := st.tempFile("read-*.jsonl") // every listed format is JSONL
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return r.Read(f.Name())
}
