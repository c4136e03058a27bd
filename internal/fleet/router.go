package fleet

import (
	"fmt"
	"math"
	"strings"

	"github.com/servetune/servetune/internal/model/sim"
)

// Replicas is what a router sees of the replicas that take new requests
// (ready, not draining) when one request arrives: the simulated fleet's
// engines (Simulate), or live engines behind a real router
// (internal/fleet/replay). Len is never 0.
type Replicas interface {
	Len() int
	// Outstanding is replica i's requests arrived and not finished.
	Outstanding(i int) int
	// Cached is how many leading tokens of the request's prompt replica
	// i holds in its prefix cache.
	Cached(i int) int
}

// Router picks the replica a request goes to. A router may keep state
// between calls; a fleet run gets its own (NewRouter).
type Router interface {
	// Name is the router's name as the command line spells it.
	Name() string
	// Pick returns an index into rs.
	Pick(rs Replicas) int
}

// engines is a request and the simulated replicas that may take it, as
// a router sees them.
type engines struct {
	q  *sim.ReplicaRequest
	rs []*sim.Replica
}

func (e *engines) Len() int              { return len(e.rs) }
func (e *engines) Outstanding(i int) int { return e.rs[i].Outstanding() }
func (e *engines) Cached(i int) int      { return e.rs[i].Cached(e.q) }

// The routers' names.
const (
	RouterRoundRobin = "round-robin"
	RouterLeastLoad  = "least-load"
	RouterPrefix     = "prefix"
)

// RouterNames lists the routers, in the order help text shows them.
var RouterNames = []string{RouterRoundRobin, RouterLeastLoad, RouterPrefix}

// DefaultPrefixBound is the prefix router's load bound: a replica may
// take a request while its outstanding requests, with this one, stay
// within 1.25 times the fleet's mean (bounded-load consistent hashing's
// 1+epsilon, Mirrokni et al. 2018, with epsilon 0.25).
const DefaultPrefixBound = 1.25

// NewRouter returns a fresh router of the given name.
func NewRouter(name string) (Router, error) {
	switch name {
	case RouterRoundRobin:
		return &RoundRobin{}, nil
	case RouterLeastLoad:
		return LeastLoad{}, nil
	case RouterPrefix:
		return &Prefix{Bound: DefaultPrefixBound}, nil
	}
	return nil, fmt.Errorf("unknown router %q (known: %s)", name, strings.Join(RouterNames, ", "))
}

var (
	_ Router = (*RoundRobin)(nil)
	_ Router = LeastLoad{}
	_ Router = (*Prefix)(nil)
)

// RoundRobin sends each request to the next replica in turn.
type RoundRobin struct{ next int }

// Name is "round-robin".
func (*RoundRobin) Name() string { return RouterRoundRobin }

// Pick returns the next replica in turn.
func (r *RoundRobin) Pick(rs Replicas) int {
	i := r.next % rs.Len()
	r.next = i + 1
	return i
}

// LeastLoad sends each request to the replica with the fewest
// outstanding requests (the first of them on a tie): Envoy's and the
// Gateway API inference extension's least-request balancing.
type LeastLoad struct{}

// Name is "least-load".
func (LeastLoad) Name() string { return RouterLeastLoad }

// Pick returns the replica with the fewest outstanding requests.
func (LeastLoad) Pick(rs Replicas) int {
	best, low := 0, rs.Outstanding(0)
	for i := 1; i < rs.Len(); i++ {
		if o := rs.Outstanding(i); o < low {
			best, low = i, o
		}
	}
	return best
}

// Prefix sends each request to the replica whose prefix cache holds the
// longest leading part of its prompt, among the replicas under the load
// bound; the least loaded of them when none holds any, or on a tie. The
// cache is the replica's own (what the engines' KV events tell a
// KV-aware router: Dynamo's KV router, llm-d's precise prefix-cache
// scorer). The bound keeps a popular prefix from piling its whole
// traffic on one replica: a replica is a candidate while its
// outstanding requests plus this one stay within Bound times the mean
// over replicas (rounded up).
type Prefix struct{ Bound float64 }

// Name is "prefix".
func (*Prefix) Name() string { return RouterPrefix }

// Pick returns the candidate holding the longest cached prefix of the
// request.
func (p *Prefix) Pick(rs Replicas) int {
	total := 1
	for i := range rs.Len() {
		total += rs.Outstanding(i)
	}
	limit := int(math.Ceil(p.Bound * float64(total) / float64(rs.Len())))
	best, bestHit, bestOut := -1, -1, 0
	for i := range rs.Len() {
		out := rs.Outstanding(i)
		if out+1 > limit {
			continue
		}
		hit := rs.Cached(i)
		if hit > bestHit || (hit == bestHit && out < bestOut) {
			best, bestHit, bestOut = i, hit, out
		}
	}
	if best < 0 {
		return LeastLoad{}.Pick(rs)
	}
	return best
}
