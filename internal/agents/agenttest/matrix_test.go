package agenttest

import "testing"

// TestInMatrix: a table's defaults run by default, every case with
// CAST_MATRIX=full, and nothing else ("full" only, as make test-full
// sets it).
func TestInMatrix(t *testing.T) {
	for _, tc := range []struct {
		env, name string
		want      bool
	}{
		{"", "claude", true},
		{"", "opencode", false},
		{"full", "opencode", true},
		{"1", "opencode", false},
	} {
		t.Setenv(MatrixEnv, tc.env)
		if got := InMatrix(tc.name, "claude", "codex"); got != tc.want {
			t.Errorf("%s=%q: InMatrix(%q) = %v, want %v", MatrixEnv, tc.env, tc.name, got, tc.want)
		}
	}
}

// TestHasTest: the guard finds a test this package declares, and not one
// it lacks.
func TestHasTest(t *testing.T) {
	if !HasTest(t, "*_test.go", "TestInMatrix") {
		t.Error("TestInMatrix not found in this package")
	}
	if HasTest(t, "*_test.go", "TestNoSuchTest") {
		t.Error("TestNoSuchTest found")
	}
}
