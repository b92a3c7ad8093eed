package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	castv1 "github.com/cast-dev/cast/internal/gen/cast/v1"
)

var pj = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: false}

// raw turns a proto message into a JSON value with snake_case names (the
// names in the .proto files, which scripts rely on).
func raw(m proto.Message) json.RawMessage {
	b, err := pj.Marshal(m)
	if err != nil {
		return json.RawMessage(`null`)
	}
	return b
}

func raws[T proto.Message](ms []T) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(ms))
	for _, m := range ms {
		out = append(out, raw(m))
	}
	return out
}

// printJSON prints v for scripts: indented JSON (--json, -o json), or
// YAML of the same document (-o yaml).
func (a *app) printJSON(v any) error {
	if a.yaml {
		// A command printing several (cast exec -j, cast watch) prints
		// a YAML stream: documents after the first begin with ---.
		if a.docs++; a.docs > 1 {
			if _, err := io.WriteString(a.out, "---\n"); err != nil {
				return err
			}
		}
		return a.printData("yaml", v)
	}
	enc := json.NewEncoder(a.out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func stateName(s castv1.SessionState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "SESSION_STATE_"))
}

func ago(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return "-"
	}
	d := time.Since(ts.AsTime()).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// formatMessage renders one transcript row for people.
func formatMessage(m *castv1.Message) string {
	head := fmt.Sprintf("#%d %s", m.Seq, kindLabel(m))
	if m.Agent != "" {
		head += " (" + m.Agent + ")"
	}
	var body string
	switch m.Kind {
	case castv1.MessageKind_MESSAGE_KIND_TOOL_CALL:
		body = m.ToolCall.GetName() + " " + m.ToolCall.GetInput()
	case castv1.MessageKind_MESSAGE_KIND_TOOL_RESULT:
		r := m.ToolResult
		body = r.GetOutput()
		if r.GetHasExitCode() {
			body = fmt.Sprintf("[exit %d] %s", r.GetExitCode(), body)
		}
	default:
		body = m.Text
	}
	// A picture's bytes are not for a terminal; its line says it is there
	// (a row that is only a picture would print a blank line).
	for _, img := range m.GetImages() {
		if body != "" {
			body += "\n"
		}
		body += fmt.Sprintf("[image: %s, %d bytes]", img.GetMediaType(), len(img.GetData()))
	}
	return head + "\n" + indent(body) + "\n"
}

func kindLabel(m *castv1.Message) string {
	k := strings.ToLower(strings.TrimPrefix(m.Kind.String(), "MESSAGE_KIND_"))
	if m.Kind == castv1.MessageKind_MESSAGE_KIND_NOTICE && m.NoticeType != "" {
		k += ":" + m.NoticeType
	}
	return k
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n")
}

// forScreen escapes control characters (ESC, CR, BEL, C1 controls, bidi
// overrides) when stdout is a terminal, so text an agent or a tool wrote
// cannot move the cursor, retitle the window or hide what follows.
// Newlines and tabs stay; pipes and --json get the bytes as stored.
func (a *app) forScreen(s string) string {
	if !a.tty {
		return s
	}
	return escapeControls(s)
}

func escapeControls(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\x%02x", r)
		case r >= 0x80 && r <= 0x9f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
