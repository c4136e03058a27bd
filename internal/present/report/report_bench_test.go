package report

import (
	"bytes"
	"context"
	"github.com/servetune/servetune/tuner/memory"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	_ "github.com/servetune/servetune/launcher/kinds" // the virtual launcher
	"github.com/servetune/servetune/store"
	"github.com/servetune/servetune/tuner"
	"github.com/servetune/servetune/tuner/spec"
)

// big200 is a 200-trial study: the quick start's space and workload with
// 200 search trials (plus its confirmation runs), in virtual time. It is
// made once per test binary.
var big200 = struct {
	once  sync.Once
	db    *store.Store // kept open for the test binary's life
	study *StudyReport
	err   error
}{}

func study200(tb testing.TB) *StudyReport {
	tb.Helper()
	big200.once.Do(func() {
		src, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "quickstart.yaml"))
		if err != nil {
			big200.err = err
			return
		}
		text := strings.Replace(string(src), "trials: 24", "trials: 200", 1)
		text = strings.Replace(text, "requests_per_level: 400", "requests_per_level: 200", 1)
		study, err := spec.ParseSpec([]byte(text), "big.yaml")
		if err != nil {
			big200.err = err
			return
		}
		ctx := context.Background()
		db, err := store.Open(ctx, store.Memory)
		if err != nil {
			big200.err = err
			return
		}
		big200.db = db
		if _, err := (&tuner.Study{Spec: study, Store: db, Memory: memory.Model{}}).Run(ctx); err != nil {
			big200.err = err
			return
		}
		big200.study, big200.err = Load(ctx, db, study.Name)
	})
	if big200.err != nil {
		tb.Fatal(big200.err)
	}
	return big200.study
}

// TestReport200Size: a 200-trial study's report stays under 2 MB (the
// time it takes is BenchmarkStudyReport200's figure).
func TestReport200Size(t *testing.T) {
	s := study200(t)
	if n := len(s.Trials); n < 200 {
		t.Fatalf("%d trials, want at least 200", n)
	}
	var b bytes.Buffer
	if err := s.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	if b.Len() > 2<<20 {
		t.Errorf("report of %d trials is %d bytes, want under 2 MB", len(s.Trials), b.Len())
	}
	t.Logf("report of %d trials: %d bytes, %d charts", len(s.Trials), b.Len(), strings.Count(b.String(), "<svg"))
}

// BenchmarkStudyReport200 renders the HTML report of a 200-trial study
// (loaded from the store once): go test -bench StudyReport200 ./internal/present/report.
// The goal is under 2 s and 2 MB; bytes/report is the size.
func BenchmarkStudyReport200(b *testing.B) {
	s := study200(b)
	var size int
	for b.Loop() {
		var buf bytes.Buffer
		if err := s.WriteHTML(&buf); err != nil {
			b.Fatal(err)
		}
		size = buf.Len()
	}
	b.ReportMetric(float64(size), "bytes/report")
	b.ReportMetric(float64(len(s.Trials)), "trials")
}

// BenchmarkStudyReport200FromDB is `servetune report` without the process:
// read the 200-trial study back from SQLite, then render it.
func BenchmarkStudyReport200FromDB(b *testing.B) {
	s := study200(b)
	ctx := context.Background()
	for b.Loop() {
		loaded, err := Load(ctx, big200.db, s.Stored.Name)
		if err != nil {
			b.Fatal(err)
		}
		if err := loaded.WriteHTML(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}
