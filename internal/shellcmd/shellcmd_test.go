package shellcmd

import "testing"

func TestOf(t *testing.T) {
	tests := []struct {
		name string
		args map[string]any
		want string
		ok   bool
	}{
		{"command string", map[string]any{"command": "ls -la"}, "ls -la", true},
		{"cmd string", map[string]any{"cmd": "git status"}, "git status", true},
		{"empty command falls to cmd", map[string]any{"command": "", "cmd": "pwd"}, "pwd", true},
		{"bash -lc script", map[string]any{"command": []any{"bash", "-lc", "echo hi && ls"}}, "echo hi && ls", true},
		{"/bin/sh -c script", map[string]any{"command": []any{"/bin/sh", "-c", "make"}}, "make", true},
		{"python -c is not a shell", map[string]any{"command": []any{"python3", "-c", "print(1)"}}, "python3 -c 'print(1)'", true},
		{"argv words quoted", map[string]any{"command": []any{"grep", "-r", "a b", "it's"}}, `grep -r 'a b' 'it'\''s'`, true},
		{"empty word quoted", map[string]any{"command": []any{"echo", ""}}, "echo ''", true},
		{"local_shell action", map[string]any{"action": map[string]any{"command": []any{"ls"}}}, "ls", true},
		{"non-string argv", map[string]any{"command": []any{"ls", 3.0}}, "", false},
		{"none", map[string]any{"path": "x"}, "", false},
	}
	for _, tc := range tests {
		got, ok := Of(tc.args)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: Of = %q, %v; want %q, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestFromInput(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"command":"ls"}`, "ls"},
		{`"just text"`, "just text"},
		{`not json`, "not json"},
		{`{"path":"x"}`, `{"path":"x"}`},
	}
	for _, tc := range tests {
		if got := FromInput(tc.in); got != tc.want {
			t.Errorf("FromInput(%s) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
