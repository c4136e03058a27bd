package measure

import (
	"context"
	"math/rand/v2"
	"time"
)

// Transport runs the phases of a run against an engine (an HTTP server,
// or the simulated engine on its virtual clock). bench.Run owns the
// request stream (the dataset, the arrival schedule, the seeds); a
// transport only sends what a phase gives it and records what happened.
type Transport interface {
	// Align resizes synthetic prompts to the engine's tokenizer where it
	// can and says how ("exact", "fit", "off", ...), for meta.
	Align(ctx context.Context, reqs []Request, rng *rand.Rand) string
	// Send runs one phase and returns one record per request it sent,
	// in send order, and the instant their offsets count from. When ctx
	// ends it returns what it has.
	Send(ctx context.Context, p Phase) ([]Record, time.Time)
}

// Converser is a Transport that runs a closed-loop phase itself
// (Phase.Sessions): the simulated engine on its virtual clock, which
// issues each turn at the virtual instant its session's previous answer
// ended plus the think time. A Transport without it is given requests
// only.
type Converser interface {
	Transport
	// Converses reports whether Send runs Phase.Sessions.
	Converses() bool
}
