package guided

import (
	"github.com/servetune/servetune/internal/testspec"

	"context"
	"path/filepath"
	"testing"

	"github.com/servetune/servetune/store"
	"github.com/servetune/servetune/tuner/spec"
)

var studySpec = testspec.Virtual

func mustSpec(t *testing.T, src string) *spec.Spec {
	t.Helper()
	study, err := spec.ParseSpec([]byte(src), "vt.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return study
}

func openStore(t *testing.T) *store.Store {
	t.Helper()
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
