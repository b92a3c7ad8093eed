package logging

import (
	"os"
	"testing"
)

// Colour only on a terminal, and never with NO_COLOR set. The master side
// of a new pseudo-terminal is a terminal; a file is not.
func TestColour(t *testing.T) {
	tty, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	defer tty.Close()
	file, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	env := func(noColor string) func(string) string {
		return func(k string) string {
			if k == "NO_COLOR" {
				return noColor
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name    string
		f       *os.File
		noColor string
		want    bool
	}{
		{"terminal", tty, "", true},
		{"terminal with NO_COLOR", tty, "1", false},
		{"file", file, "", false},
		{"file with NO_COLOR", file, "1", false},
	} {
		if got := Colour(tc.f, env(tc.noColor)); got != tc.want {
			t.Errorf("%s: colour %v, want %v", tc.name, got, tc.want)
		}
	}
}
