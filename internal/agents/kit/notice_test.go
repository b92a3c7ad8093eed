package kit

import "testing"

func TestNoticeTag(t *testing.T) {
	for _, tag := range []NoticeTag{CastNotice, "cast-notice"} {
		for _, text := range []string{"claude -> codex", "", "two\nlines\n", "has </other> and <" + string(tag) + ">"} {
			typ, got, ok := tag.Unwrap("  " + tag.Wrap("agent_switch", text) + "\n")
			if !ok || typ != "agent_switch" || got != text {
				t.Errorf("%s: %q came back as %q %q %v", tag, text, typ, got, ok)
			}
		}
	}
	for _, s := range []string{
		"plain text",
		`<cast_notice type="Agent">x</cast_notice>`,
		`<cast_notice type="">x</cast_notice>`,
		`<cast_notice type="merge">x`,
		`<cast-notice type="merge">x</cast-notice>`,
		`say <cast_notice type="merge">x</cast_notice>`,
	} {
		if typ, text, ok := CastNotice.Unwrap(s); ok {
			t.Errorf("%q read as a notice %q %q", s, typ, text)
		}
	}
}
