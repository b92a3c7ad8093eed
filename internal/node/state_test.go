package node

import (
	"os"
	"path/filepath"
	"testing"
)

// A held turn is woken after a failed state write whichever writer's
// write succeeds next: the CI failure this guards against had another
// update write the file first, so recordAgain saw nothing to catch up and
// the session slept forever.
func TestStateRecoveryIsReportedOnceWhoeverWrites(t *testing.T) {
	dir := t.TempDir()
	st, err := loadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	gone := filepath.Join(dir, "gone")
	st.path = filepath.Join(gone, "state.json") // a write here fails for real (ENOENT)
	if err := st.update(func(m map[string]*owned) { m["s"] = &owned{ReceivedSeq: 3} }); err == nil {
		t.Fatal("a write into a missing dir succeeded")
	}
	if !st.behind() {
		t.Fatal("a failed write is not reported as behind")
	}
	if now, err := st.catchUp(); err == nil || now {
		t.Fatalf("catchUp while writes fail = %v, %v; want an error", now, err)
	}
	if err := os.Mkdir(gone, 0o700); err != nil {
		t.Fatal(err)
	}
	// Another writer gets there first.
	if err := st.update(func(m map[string]*owned) { m["s"].DeliveredSeq = 1 }); err != nil {
		t.Fatal(err)
	}
	if st.behind() {
		t.Fatal("still behind after a good write")
	}
	tests := []struct {
		name string
		want bool
	}{
		{"first catchUp after the recovery", true},
		{"second catchUp", false},
	}
	for _, tt := range tests {
		now, err := st.catchUp()
		if err != nil || now != tt.want {
			t.Fatalf("%s = %v, %v; want %v", tt.name, now, err, tt.want)
		}
	}
}
