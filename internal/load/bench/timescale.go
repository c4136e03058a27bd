package bench

import (
	"time"

	"github.com/servetune/servetune/internal/load/measure"
)

// scale is cfg.TimeScale, 1 when unset.
func (cfg Config) scale() float64 {
	if cfg.TimeScale > 0 {
		return cfg.TimeScale
	}
	return 1
}

// realClock is cfg as sent to its engine, on this machine's clock: the
// rate TimeScale times higher, the timeout and the duration that much
// shorter. The summary's options stay in the engine's time, where the
// summary is made.
func (cfg Config) realClock() Config {
	k := cfg.scale()
	if k == 1 {
		return cfg
	}
	cfg.Load.Rate *= k
	cfg.Timeout = time.Duration(float64(cfg.Timeout) / k)
	cfg.Duration = time.Duration(float64(cfg.Duration) / k)
	return cfg
}

// summarize is the measured records' summary in the engine's time, k
// times faster than this machine's: the records are converted first, in
// place, from the engine's own clock where it reports one, so that this
// machine's overhead is not multiplied by k (measure.EngineTime).
func summarize(records []measure.Record, opts measure.SummaryOptions, k float64) measure.Summary {
	if k != 1 {
		measure.EngineTime(records, k)
	}
	return measure.Summarize(records, opts)
}
