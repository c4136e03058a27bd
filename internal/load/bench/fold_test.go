package bench

import (
	"context"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
)

// TestRunFoldsChunks: an HTTP level keeps no chunk times in its records
// unless asked (KeepChunks, or KeepSamples for compare), folding them into
// its summary as each request ends; the ITL counts every gap either way.
func TestRunFoldsChunks(t *testing.T) {
	srv := (&fakeServer{TTFT: time.Millisecond, PerToken: time.Millisecond}).start(t)
	for _, keep := range []bool{false, true} {
		cfg := baseConfig(srv.URL)
		cfg.Dataset.Output = Dist{Kind: DistFixed, Value: 10}
		cfg.Load = measure.Load{MaxConcurrency: 4}
		cfg.NumRequests, cfg.Warmup, cfg.KeepChunks = 20, 2, keep
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		chunks := 0
		for _, r := range res.Records {
			chunks += len(r.Chunks)
		}
		if keep != (chunks > 0) {
			t.Errorf("KeepChunks %v: the records keep %d chunks", keep, chunks)
		}
		if s := res.Summary; s.Completed != 20 || s.ITL.N != 20*9 || s.PeakOutputThroughput <= 0 {
			t.Errorf("KeepChunks %v: completed %d, ITL over %d gaps (want 180), peak output %g", keep, s.Completed, s.ITL.N, s.PeakOutputThroughput)
		}
	}
}
