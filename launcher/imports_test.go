package launcher

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsNarrow: package launcher starts and stops engines; it does
// not import what runs load against them (a transport's type lives in
// internal/load/measure), nor the simulator (its kinds are
// launcher/simulated's).
func TestImportsNarrow(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	banned := []string{"github.com/servetune/servetune/internal/load/bench", "github.com/servetune/servetune/internal/model/sim"}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range af.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			for _, b := range banned {
				if p == b {
					t.Errorf("%s imports %s", f, p)
				}
			}
		}
	}
}
