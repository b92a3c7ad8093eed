package delivery

import "testing"

func TestRowBookkeeping(t *testing.T) {
	type step struct {
		op      string // accept, refuse, store
		id      string
		node    string
		path    string
		seq     int64
		want    Row
		comment string
	}
	tests := []struct {
		name  string
		start Row
		steps []step
	}{
		{name: "new session recorded on accept, advanced on store", steps: []step{
			{op: "accept", id: "n1", node: "a", path: "/p1", seq: 5, want: Row{"n1", "a", "/p1", 5}},
			{op: "store", seq: 6, want: Row{"n1", "a", "/p1", 6}},
			{op: "store", seq: 9, want: Row{"n1", "a", "/p1", 9}},
		}},
		{name: "store never goes backwards", start: Row{"n1", "a", "/p1", 9}, steps: []step{
			{op: "store", seq: 4, want: Row{"n1", "a", "/p1", 9}},
			{op: "accept", id: "n1", seq: 3, want: Row{"n1", "a", "/p1", 9}, comment: "late accept of an older prompt"},
		}},
		{name: "refused first prompt records nothing, later store too", steps: []step{
			{op: "refuse", want: Row{}},
			{op: "store", seq: 7, want: Row{}},
		}},
		{name: "refused prompt on a known session marks nothing seen", start: Row{"n1", "a", "/p1", 4}, steps: []step{
			{op: "refuse", want: Row{"n1", "a", "/p1", 4}},
		}},
		{name: "resume keeps id, node and path when the runtime reports none", start: Row{"n1", "a", "/p1", 4}, steps: []step{
			{op: "accept", seq: 8, want: Row{"n1", "a", "/p1", 8}},
		}},
		{name: "same id, moved path", start: Row{"n1", "a", "/p1", 4}, steps: []step{
			{op: "accept", id: "n1", node: "b", path: "/p2", seq: 8, want: Row{"n1", "b", "/p2", 8}},
		}},
		{name: "a new native id replaces the row, its KnownUpto included", start: Row{"n1", "a", "/p1", 40}, steps: []step{
			{op: "accept", id: "n2", node: "b", path: "/p2", seq: 12, want: Row{"n2", "b", "/p2", 12}},
			{op: "store", seq: 13, want: Row{"n2", "b", "/p2", 13}},
		}},
		{name: "accept without any id records nothing", steps: []step{
			{op: "accept", node: "a", seq: 3, want: Row{}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.start
			for i, s := range tc.steps {
				prev := r
				switch s.op {
				case "accept":
					r = r.Accepted(s.id, s.node, s.path, s.seq)
				case "refuse":
					r = r.Refused()
				case "store":
					r = r.Stored(s.seq)
				}
				if r != s.want {
					t.Fatalf("step %d %s(%q, %d) %s: got %+v, want %+v", i, s.op, s.id, s.seq, s.comment, r, s.want)
				}
				if r.Recorded() && r.KnownUpto < prev.KnownUpto && r.NativeID == prev.NativeID {
					t.Fatalf("step %d: KnownUpto went back %d -> %d", i, prev.KnownUpto, r.KnownUpto)
				}
			}
		})
	}
}

// The order matters: a delta never echoes the agent's own answer because the
// reply's seq is stored into the row before the next transition.
func TestStoredReplyIsNotInNextDelta(t *testing.T) {
	r := Row{}.Accepted("n1", "a", "", 1) // prompt at 1
	r = r.Stored(2).Stored(3)             // own answer at 2, 3
	d := Transition(Input{Native: &r, Content: []int64{1, 2, 3, 5}})
	if d.Kind != Delta || d.Missed != (Range{5, 5}) {
		t.Fatalf("%+v", d)
	}
	// Without the store, the answer would come back: the guard is the store.
	r0 := Row{}.Accepted("n1", "a", "", 1)
	if d := Transition(Input{Native: &r0, Content: []int64{1, 2, 3, 5}}); d.Missed != (Range{2, 5}) {
		t.Fatalf("%+v", d)
	}
}
