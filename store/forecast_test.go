package store

import (
	"context"
	"math"
	"testing"

	"github.com/servetune/servetune/internal/serving/engine"
)

// TestForecastStored: the sampler's forecast reads back in the order it
// was stored, a second one replaces the first, a figure that is not a
// number is stored as none, the bound keeps the first MaxForecasts, and
// the rows go with their study.
func TestForecastStored(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t)
	run, _, err := s.Begin(ctx, Study{Name: "f", Spec: "x"}, BeginOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := []Forecast{
		{Settings: engine.Settings{"tensor_parallel": 2.0}, Value: 1234.5, Met: true, PStart: 1},
		{Settings: engine.Settings{"tensor_parallel": 8.0}, Value: math.NaN(), Met: true, PStart: 0.01},
		{Settings: engine.Settings{"tensor_parallel": 1.0, "kv_cache_dtype": "fp8"}, Failure: "infeasible"},
	}
	if err := run.SetForecast(ctx, first); err != nil {
		t.Fatal(err)
	}
	got, err := s.Forecasts(ctx, run.Study.ID)
	if err != nil || len(got) != 3 {
		t.Fatalf("forecasts %+v, %v", got, err)
	}
	if got[0].Settings["tensor_parallel"] != 2.0 || got[0].Value != 1234.5 || !got[0].Met || got[0].PStart != 1 {
		t.Errorf("first row %+v", got[0])
	}
	if got[1].Value != 0 || got[1].Met || got[1].PStart != 0.01 {
		t.Errorf("a NaN figure read back as %+v, want none (0, not met)", got[1])
	}
	if got[2].Failure != "infeasible" || got[2].Settings["kv_cache_dtype"] != "fp8" {
		t.Errorf("third row %+v", got[2])
	}

	many := make([]Forecast, MaxForecasts+10)
	for i := range many {
		many[i] = Forecast{Settings: engine.Settings{"max_running_requests": float64(i)}, Value: float64(i), Met: true, PStart: 1}
	}
	if err := run.SetForecast(ctx, many); err != nil {
		t.Fatal(err)
	}
	got, err = s.Forecasts(ctx, run.Study.ID)
	if err != nil || len(got) != MaxForecasts {
		t.Fatalf("%d forecasts stored of %d, want the bound %d (%v)", len(got), len(many), MaxForecasts, err)
	}
	if got[0].Value != 0 || got[MaxForecasts-1].Value != MaxForecasts-1 {
		t.Errorf("the bound kept %g..%g, want the first %d", got[0].Value, got[MaxForecasts-1].Value, MaxForecasts)
	}

	if err := run.End(ctx, StudyFinished); err != nil {
		t.Fatal(err)
	}
	if err := run.SetForecast(ctx, first); err == nil {
		t.Error("a run that ended stored a forecast")
	}
	if err := s.DeleteStudy(ctx, "f"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM forecasts`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d forecast rows left after the study was deleted (%v)", n, err)
	}
}
