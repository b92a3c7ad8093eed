package validate

import (
	"strings"
	"testing"
)

func TestOneLine(t *testing.T) {
	long := strings.Repeat("x", 600)
	tests := []struct {
		name string
		k    Kind
		v    string
		want string // "" = only checked to pass
	}{
		{"clean stays", Ident, "toolu_01ABC", "toolu_01ABC"},
		{"empty stays", Ident, "", ""},
		{"newline", Ident, "a\nb", `a\nb`},
		{"tab and CR", ToolName, "a\tb\rc", `a\tb\rc`},
		{"escape", Ident, "\x1b[31mred", `\x1b[31mred`},
		{"DEL", Ident, "del\x7f", `del\x7f`},
		{"NUL", Ident, "nul\x00", `nul\x00`},
		{"C1", Title, "nel\u0085", `nel\u0085`},
		{"Latin-1", Ident, "caf\xe9", "caf\uFFFD"},
		{"long", Ident, long, ""},
		{"long tool name", ToolName, long, ""},
		{"long runes", Ident, strings.Repeat("é", 300), ""},
	}
	for _, tc := range tests {
		got := OneLine(tc.k, tc.v)
		if tc.want != "" && got != tc.want {
			t.Errorf("%s: OneLine(%q) = %q, want %q", tc.name, tc.v, got, tc.want)
		}
		if err := Check(tc.k, "f", got); err != nil {
			t.Errorf("%s: OneLine(%q) = %q, which Check refuses: %v", tc.name, tc.v, got, err)
		}
		if again := OneLine(tc.k, tc.v); again != got {
			t.Errorf("%s: not the same twice: %q, %q", tc.name, got, again)
		}
	}
	if OneLine(Ident, long) == OneLine(Ident, long[:599]+"y") {
		t.Error("two long ids that differ at their end came out the same")
	}
}
