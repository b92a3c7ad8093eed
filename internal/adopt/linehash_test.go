package adopt

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// The hash of the first mark bytes is taken as the bytes are written,
// whatever the chunks, where a line ends at mark; elsewhere none is.
func TestLineHashMark(t *testing.T) {
	data := []byte(strings.Repeat("a line\n", 40) + "half")
	for _, chunk := range []int{1, 5, 7, 64, len(data)} {
		for mark := int64(1); mark <= int64(len(data)); mark++ {
			w := &lineHash{h: sha256.New(), mark: mark}
			for i := 0; i < len(data); i += chunk {
				if n, err := w.Write(data[i:min(i+chunk, len(data))]); err != nil || n != min(chunk, len(data)-i) {
					t.Fatalf("chunk %d: wrote %d, %v", chunk, n, err)
				}
			}
			sum := sha256.Sum256(data[:mark])
			want := ""
			if data[mark-1] == '\n' {
				want = hex.EncodeToString(sum[:])
			}
			if w.markSum != want {
				t.Fatalf("chunk %d, mark %d: %q, want %q", chunk, mark, w.markSum, want)
			}
			whole := sha256.Sum256(data[:w.end])
			if got, err := w.sum(); err != nil || got != hex.EncodeToString(whole[:]) || w.end != int64(len(data)-len("half")) {
				t.Fatalf("chunk %d, mark %d: the whole lines' sum changed (%s, %d)", chunk, mark, got, w.end)
			}
		}
	}
}
