package sim

// Deviation is an effect a real engine may have that the simulator's model
// of it lacks or weighs differently: not a constant moved, a term the
// model does not have. The guided benchmark (make guided-bench) runs
// studies on engines that deviate this way, to see how a search that
// trusts the stock model fares when the model is wrong in structure.
// The zero value deviates in nothing and leaves every figure unchanged;
// it is carried by Config, never by a spec or a calibration profile.
type Deviation struct {
	// LongAttention: attention (its FLOPs and KV reads) of a sequence
	// whose context exceeds LongContext tokens costs LongAttention times
	// the model's (e.g. 1.25: a split-KV kernel path that is slower per
	// token), the sequence's whole attention, in decode and in prefill
	// chunks. 0 or 1: none.
	LongAttention float64
	LongContext   int
	// AdmitEvery: waiting requests join the batch only on every
	// AdmitEvery-th engine step (a scheduler that plans several steps at
	// once), or whenever nothing runs. 0 or 1: every step, as modelled.
	AdmitEvery int
	// SharedPrefix: the first SharedPrefix tokens of every prompt that
	// carries no prefix of its own are one prefix (a system prompt the
	// workload's description omits), which the engine's prefix cache
	// serves when prefix caching is on: their first SharedPrefix tokens
	// are the prefix's, whatever the prompt's (core.tokenAt). 0: none.
	SharedPrefix int
	// SeqReserveMiB: a start-up reservation of this many MiB per GPU for
	// each request slot (max_running_requests), outside the KV cache
	// (per-request sampler and scheduler buffers), so the KV cache
	// shrinks as the batch grows. 0: none.
	SeqReserveMiB float64
	// SyncHost: the host's per-step work does not overlap the GPU's even
	// where the model overlaps it (vLLM's async scheduling).
	SyncHost bool
}

// sharedPrefixGroup is the prefix group of SharedPrefix: far from the
// workload's own groups (measure.Request.PrefixID counts from 0).
const sharedPrefixGroup = 1 << 30

// attentionWeight is the factor on the attention of a sequence whose
// context is ctx tokens.
func (d Deviation) attentionWeight(ctx int) float64 {
	if d.LongAttention > 0 && ctx > d.LongContext {
		return d.LongAttention
	}
	return 1
}

// admits reports whether the waiting queue may join the step after
// steps planned steps, with running requests in the batch.
func (d Deviation) admits(steps uint64, running int) bool {
	return d.AdmitEvery <= 1 || running == 0 || steps%uint64(d.AdmitEvery) == 0
}

// sharePrefix gives s the shared prefix when it has none of its own.
func (d Deviation) sharePrefix(s *seq) {
	if d.SharedPrefix > 0 && s.prefixID < 0 && s.prompt > d.SharedPrefix {
		s.prefixID, s.prefixTokens = sharedPrefixGroup, d.SharedPrefix
	}
}

// seqReserve is the per-slot reservation of cfg, in bytes per GPU.
func (d Deviation) seqReserve(cfg Config) float64 {
	if d.SeqReserveMiB <= 0 {
		return 0
	}
	seqs := cfg.MaxRunningRequests
	if seqs == 0 { // SGLang's default, as activationPeak counts it
		seqs = cfg.CUDAGraphMaxBS
	}
	return d.SeqReserveMiB * (1 << 20) * float64(seqs)
}
