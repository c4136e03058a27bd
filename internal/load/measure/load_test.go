package measure

import "testing"

func TestFormatRate(t *testing.T) {
	for _, tc := range []struct {
		r    float64
		want string
	}{
		{6.441961327797018, "6.442"}, {14, "14"}, {0.5, "0.5"}, {0.123456, "0.1235"}, {1234.6, "1235"},
		{12345.6, "12350"}, {0, "inf"},
	} {
		if got := FormatRate(tc.r); got != tc.want {
			t.Errorf("FormatRate(%v) = %q, want %q", tc.r, got, tc.want)
		}
	}
	for _, tc := range []struct {
		l    Load
		want string
	}{
		{Load{Rate: 6.441961327797018}, "rate=6.442"}, {Load{MaxConcurrency: 8}, "concurrency=8"},
		{Load{Rate: 14, MaxConcurrency: 8}, "rate=14,concurrency=8"}, {Load{}, "rate=inf"},
	} {
		if got := tc.l.Name(); got != tc.want {
			t.Errorf("%+v: name %q, want %q", tc.l, got, tc.want)
		}
	}
}
