package kit

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestEachLine(t *testing.T) {
	long := strings.Repeat("y", 1<<20+7) // longer than the reader's buffer
	tests := []struct {
		name, in string
		want     []string
	}{
		{"empty", "", nil},
		{"no trailing newline", "a\nb", []string{"a", "b"}},
		{"blank and padded lines", "\n  a \r\n\n\t\nb\n", []string{"a", "b"}},
		{"a line longer than the buffer", "x\n" + long + "\nz", []string{"x", long, "z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			if err := EachLine(strings.NewReader(tt.in), func(l []byte) { got = append(got, string(l)) }); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %d lines %.40q, want %d", len(got), got, len(tt.want))
			}
		})
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

func TestEachLineReportsReadErrors(t *testing.T) {
	if err := EachLine(failingReader{}, func([]byte) {}); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("got %v, want the reader's error", err)
	}
}
