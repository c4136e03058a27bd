package measure

import "testing"

// TestDollars: money reads the same everywhere: separators, no exponent.
func TestDollars(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{
		{51684.2, "$51,684"}, {3349605, "$3,349,605"}, {0.386, "$0.386"}, {12.54, "$12.5"},
		{100, "$100"}, {999.6, "$1,000"}, {-2500, "-$2,500"},
	} {
		if got := Dollars(c.v); got != c.want {
			t.Errorf("Dollars(%g) = %q, want %q", c.v, got, c.want)
		}
	}
	if got := DollarsPer(51684, "month"); got != "$51,684/month" {
		t.Errorf("DollarsPer = %q", got)
	}
}
