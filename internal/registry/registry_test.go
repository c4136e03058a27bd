package registry

import (
	"slices"
	"testing"
)

// Values come back by name and in name order; an empty, taken or
// incomplete registration panics naming the kind.
func TestRegistry(t *testing.T) {
	r := New[int]("test")
	r.Add("b", 2, true)
	r.Add("a", 1, true)
	if v, ok := r.Lookup("b"); !ok || v != 2 {
		t.Errorf("Lookup(b) = %d %v", v, ok)
	}
	if _, ok := r.Lookup("c"); ok {
		t.Error("Lookup(c) found a value")
	}
	if got := r.Names(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Names() = %v", got)
	}
	if got := r.All(); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("All() = %v", got)
	}
	for _, tc := range []struct {
		name  string
		valid bool
	}{{"a", true}, {"", true}, {"d", false}} {
		func() {
			defer func() {
				if p := recover(); p == nil {
					t.Errorf("Add(%q, valid %v) did not panic", tc.name, tc.valid)
				}
			}()
			r.Add(tc.name, 4, tc.valid)
		}()
	}
}

type color string

func TestParseNamesEveryKnownValue(t *testing.T) {
	known := []color{"red", "green"}
	if c, err := Parse("color", "green", known); err != nil || c != "green" {
		t.Errorf("Parse(green) = %q, %v", c, err)
	}
	_, err := Parse("color", "blue", known)
	if err == nil || err.Error() != `unknown color "blue" (known: red, green)` {
		t.Errorf("Parse(blue) error = %v", err)
	}
	if got := Strings(known); !slices.Equal(got, []string{"red", "green"}) {
		t.Errorf("Strings() = %v", got)
	}
}
