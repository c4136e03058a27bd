package fleet

import (
	"fmt"
	"math"
	"strings"

	"github.com/servetune/servetune/internal/model/sim"
)

// Router picks the replica a request goes to, among the replicas that
// take new requests (ready, not draining). rs is never empty. A router
// may keep state between calls; a fleet run gets its own (NewRouter).
type Router interface {
	// Name is the router's name as the command line spells it.
	Name() string
	// Pick returns an index into rs.
	Pick(q *sim.ReplicaRequest, rs []*sim.Replica) int
}

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
func (r *RoundRobin) Pick(_ *sim.ReplicaRequest, rs []*sim.Replica) int {
	i := r.next % len(rs)
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
func (LeastLoad) Pick(_ *sim.ReplicaRequest, rs []*sim.Replica) int {
	best := 0
	for i, r := range rs {
		if r.Outstanding() < rs[best].Outstanding() {
			best = i
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

// Pick returns the candidate holding the longest cached prefix of q.
func (p *Prefix) Pick(q *sim.ReplicaRequest, rs []*sim.Replica) int {
	total := 1
	for _, r := range rs {
		total += r.Outstanding()
	}
	limit := int(math.Ceil(p.Bound * float64(total) / float64(len(rs))))
	best, bestHit := -1, -1
	for i, r := range rs {
		if r.Outstanding()+1 > limit {
			continue
		}
		hit := r.Cached(q)
		if hit > bestHit || (hit == bestHit && r.Outstanding() < rs[best].Outstanding()) {
			best, bestHit = i, hit
		}
	}
	if best < 0 {
		return LeastLoad{}.Pick(q, rs)
	}
	return best
}
