package agents

import (
	"fmt"

	"github.com/cast-dev/cast/internal/transcript"
)

// WriteFrom writes msgs with w: streamed when w is a StreamWriter,
// otherwise read into memory whole for its Write.
func WriteFrom(w Writer, t Target, msgs MessageSource) (Written, error) {
	if sw, ok := w.(StreamWriter); ok {
		return sw.WriteStream(t, msgs)
	}
	all, err := Collect(msgs)
	if err != nil {
		return Written{}, err
	}
	return w.Write(t, all)
}

// Collect reads all of msgs into memory.
func Collect(msgs MessageSource) ([]transcript.Message, error) {
	out := make([]transcript.Message, 0, msgs.Len())
	err := msgs.Each(func(_ int64, m *transcript.Message) error {
		out = append(out, *m)
		return nil
	})
	return out, err
}

// SliceSource is messages already in memory as a MessageSource; a
// position is an index.
type SliceSource []transcript.Message

// Len implements MessageSource.
func (s SliceSource) Len() int { return len(s) }

// Each implements MessageSource.
func (s SliceSource) Each(each func(pos int64, m *transcript.Message) error) error {
	for i := range s {
		if err := each(int64(i), &s[i]); err != nil {
			return err
		}
	}
	return nil
}

// At implements MessageSource.
func (s SliceSource) At(pos int64) (transcript.Message, error) {
	if pos < 0 || pos >= int64(len(s)) {
		return transcript.Message{}, fmt.Errorf("agents: message position %d out of %d", pos, len(s))
	}
	return s[pos], nil
}
