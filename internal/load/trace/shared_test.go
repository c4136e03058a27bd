package trace

import "testing"

// A run is shared only as far as another request starts with the same
// ids; equal ids later in a prompt share nothing, and two requests with
// the same shared run get the same name.
func TestSharedRuns(t *testing.T) {
	reqs := []Request{
		{HashIDs: []int64{1, 2, 3}},
		{HashIDs: []int64{1, 2, 4}},
		{HashIDs: []int64{9, 1, 2}},
		{HashIDs: []int64{1, 2, 3, 5}},
		{},
	}
	runs, names := SharedRuns(reqs)
	want := []int{3, 2, 0, 3, 0}
	for i := range want {
		if runs[i] != want[i] {
			t.Errorf("request %d: run %d, want %d", i, runs[i], want[i])
		}
	}
	if names[0] != names[3] || names[0] == names[1] || names[2] != 0 || names[4] != 0 {
		t.Errorf("names %v: want 0 and 3 alike, 1 apart, none for 2 and 4", names)
	}
}
