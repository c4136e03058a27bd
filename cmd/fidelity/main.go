// Command fidelity runs the simulator on every public measurement of the
// fidelity suite and prints its error per regime and metric (make
// fidelity; docs/fidelity.md).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/servetune/servetune/internal/model/fidelity"
)

func main() {
	suite := flag.String("suite", "internal/model/sim/testdata/fidelity/runs.json", "the suite's runs")
	medians := flag.String("medians", "internal/model/sim/medians.json", "the recorded medians")
	out := flag.String("o", "bin/fidelity.md", "where the whole table goes")
	update := flag.Bool("update", false, "record the current medians instead of checking against them")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "fidelity: no arguments expected; see -h")
		os.Exit(2)
	}
	os.Exit(fidelity.Main(os.Stdout, os.Stderr, *suite, *medians, *out, *update))
}
