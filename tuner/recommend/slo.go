package recommend

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

var sloRE = regexp.MustCompile(`^(ttft|tpot|itl|e2el)_(mean|p50|p90|p95|p99)_ms$`)

// ParseSLO reads SLO limits written as a spec's slo keys with values:
// "ttft_p99_ms=2000,tpot_p99_ms=50" (also ':' for '=').
func ParseSLO(expr string) (SLO, error) {
	var slo SLO
	for _, part := range strings.Split(expr, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			k, v, ok = strings.Cut(part, ":")
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if ok && k == ErrorRate {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f >= 0 && f < 1) {
				return nil, fmt.Errorf("SLO %q: the error rate is a share of requests, at least 0 and below 1 (0.01 accepts 1%%)", part)
			}
			slo = append(slo, Limit{Metric: ErrorRate, Max: f})
			continue
		}
		if !ok || !sloRE.MatchString(k) {
			return nil, fmt.Errorf("SLO %q: want METRIC_STAT_ms=LIMIT, METRIC ttft|tpot|itl|e2el, STAT mean|p50|p90|p95|p99, e.g. ttft_p99_ms=2000", part)
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f > 0) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("SLO %q: the limit must be a positive number of milliseconds", part)
		}
		slo = append(slo, Limit{Metric: strings.TrimSuffix(k, "_ms"), Max: f})
	}
	if len(slo) == 0 {
		return nil, fmt.Errorf("SLO %q: no limit (e.g. ttft_p99_ms=2000,tpot_p99_ms=50)", expr)
	}
	if err := slo.once(); err != nil {
		return nil, fmt.Errorf("SLO %q: %w", expr, err)
	}
	return slo, nil
}

// LimitName says whether name is a latency limit's key: METRIC_STAT_ms,
// METRIC ttft, tpot, itl or e2el, STAT mean, p50, p90, p95 or p99.
func LimitName(name string) bool { return sloRE.MatchString(name) }
