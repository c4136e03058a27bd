package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

func TestUnknownSet(t *testing.T) {
	b := bench{from: 1, realities: 1, out: io.Discard}
	err := b.run(context.Background(), "../../examples/guided-bench.yaml", []string{"nonesuch"})
	if err == nil || !strings.Contains(err.Error(), "nonesuch") {
		t.Errorf("unknown set: %v", err)
	}
}
