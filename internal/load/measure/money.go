package measure

import (
	"math"
	"strconv"
	"strings"
)

// Dollars writes an amount of money the one way every output does:
// whole dollars with thousands separators, "$51,684"; amounts under $100
// keep three significant figures ("$0.386", "$12.5"); "-" for no amount
// (an infinity or NaN).
func Dollars(v float64) string {
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return "-"
	}
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	if v < 100 {
		return sign + "$" + strconv.FormatFloat(v, 'g', 3, 64)
	}
	s := strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return sign + "$" + b.String()
}

// DollarsPer writes an amount per unit: "$51,684/month", "$0.386/Mtok".
func DollarsPer(v float64, unit string) string {
	if d := Dollars(v); d != "-" {
		return d + "/" + unit
	}
	return "-"
}
