package sampler_test

import (
	"slices"
	"testing"

	_ "github.com/servetune/servetune/tuner/guided" // registers the guided kind
	"github.com/servetune/servetune/tuner/sampler"
	"github.com/servetune/servetune/tuner/spec"
)

// TestSpecKindsImplemented: the kinds a spec may name and the kinds the
// program implements are the same set, so no spec parses and then fails
// to build its sampler, and no implemented kind is refused by the parser.
func TestSpecKindsImplemented(t *testing.T) {
	want := slices.Sorted(slices.Values(spec.SamplerKinds()))
	if got := sampler.Kinds(); !slices.Equal(got, want) {
		t.Fatalf("tuner/sampler implements %v, the spec names %v", got, want)
	}
}
