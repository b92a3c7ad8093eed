package agents

import (
	"errors"
	"strings"
	"unicode"

	"github.com/cast-dev/cast/internal/transcript"
)

// Title is what an agent's own session picker should show for a rebuilt
// session: the first thing the user typed, on one line, without control
// characters (a terminal's colour codes pasted in; the control plane
// refuses a title holding one), at most max runes ("…" marks a cut).
// Writers whose format has a title or summary field put it there, so the
// picker neither shows a blank nor asks a model.
func Title(msgs []transcript.Message, max int) string {
	t, _ := TitleOf(SliceSource(msgs), max)
	return t
}

// errTitled stops TitleOf's walk at the first title.
var errTitled = errors.New("titled")

// TitleOf is Title of messages read one at a time: it reads up to the
// first user text only.
func TitleOf(msgs MessageSource, max int) (string, error) {
	var title string
	err := msgs.Each(func(_ int64, m *transcript.Message) error {
		if m.Kind != transcript.KindUser {
			return nil
		}
		title = strings.Join(strings.Fields(strings.Map(controlAsSpace, m.Text)), " ")
		if title == "" {
			return nil
		}
		if r := []rune(title); len(r) > max {
			title = string(r[:max-1]) + "…"
		}
		return errTitled
	})
	if err != nil && !errors.Is(err, errTitled) {
		return "", err
	}
	return title, nil
}

// controlAsSpace maps a control character to a space (strings.Map).
func controlAsSpace(r rune) rune {
	if unicode.IsControl(r) {
		return ' '
	}
	return r
}
