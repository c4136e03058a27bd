package sampler

import (
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/servetune/servetune/space"
	"github.com/servetune/servetune/trial"
	"github.com/servetune/servetune/tuner/spec"
)

func init() {
	Register(Kind{Name: spec.SamplerGrid, New: newGrid})
}

// grid proposes every point of a discrete space once, in a seeded order.
type grid struct {
	mu     sync.Mutex
	points []space.Settings
	next   int // points[:next] are proposed
}

func newGrid(searchSpace space.Space, seed int64) (Sampler, error) {
	points, err := searchSpace.Grid()
	if err != nil {
		return nil, fmt.Errorf("sampler grid: %w", err)
	}
	// A seeded shuffle so a truncated grid still spreads over the space.
	rng := rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))
	rng.Shuffle(len(points), func(i, j int) { points[i], points[j] = points[j], points[i] })
	return &grid{points: points}, nil
}

func (s *grid) Kind() string { return spec.SamplerGrid }

func (s *grid) Ask() (Proposal, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next >= len(s.points) {
		return Proposal{}, ErrExhausted
	}
	s.next++
	return Proposal{ID: s.next - 1, Settings: s.points[s.next-1].Clone()}, nil
}

func (s *grid) Observe(int, trial.Result)     {}
func (s *grid) Tell(int, float64, bool) error { return nil }
func (s *grid) Summary() string               { return "" }
func (s *grid) Replay(set space.Settings, _ float64, _ bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.skip(set)
	return nil
}

func (s *grid) Reserve(set space.Settings) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.skip(set)
}

// skip moves one not-yet-proposed point equal to set among the proposed
// ones.
func (s *grid) skip(set space.Settings) {
	for i := s.next; i < len(s.points); i++ {
		if sameSettings(s.points[i], set) {
			s.points[s.next], s.points[i] = s.points[i], s.points[s.next]
			s.next++
			return
		}
	}
}

func sameSettings(a, b space.Settings) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if fmt.Sprint(v) != fmt.Sprint(b[k]) {
			return false
		}
	}
	return true
}
