package measure

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// SLO holds goodput limits in milliseconds; zero means "no limit".
type SLO struct {
	TTFTms float64 `json:"ttft_ms,omitempty"`
	TPOTms float64 `json:"tpot_ms,omitempty"`
	E2ELms float64 `json:"e2el_ms,omitempty"`
}

// SummaryOptions control Summarize.
type SummaryOptions struct {
	Goodput   SLO
	Bootstrap int    // bootstrap resamples for CIs; 0 = default
	Seed      uint64 // seed of the bootstrap resampling
	// KeepSamples stores the per-request TTFT, TPOT, ITL and E2EL values in
	// Summary.Samples (for `bench compare`).
	KeepSamples bool
	// Folded, when set, holds the records' chunk times (their ITL and
	// output arrivals), folded in as each request ended; the records
	// have none. Not with KeepSamples, which needs every gap.
	Folded *Folded
}

// Summary is the result of one run (one load level), written with the keys
// and JSON types of `vllm bench serve --save-result --save-detailed`
// (measure/json.go) so that scripts read either. Latency fields are
// milliseconds.
type Summary struct {
	// The run as vLLM's result file describes it; set by the benchmark.
	Date        string  `json:"date"`         // local start time, YYYYMMDD-HHMMSS
	Backend     string  `json:"backend"`      // vLLM's name of the API: openai or openai-chat
	ModelID     string  `json:"model_id"`     // the model named in requests
	TokenizerID string  `json:"tokenizer_id"` // the model's (prompts are sized by the server's /tokenize)
	NumPrompts  int     `json:"num_prompts"`  // measured requests sent
	Burstiness  float64 `json:"burstiness"`   // gamma shape of arrivals, 1 = Poisson

	Duration  float64 `json:"duration"` // seconds, first send to last completion
	Completed int     `json:"completed"`
	Failed    int     `json:"failed"`
	// Errors counts failures by ErrorClass, every class present; written
	// as error_counts (vLLM's errors is the per-request list in Detail).
	Errors map[string]int `json:"error_counts"`
	// ErrorMessages holds the first message of each failure class seen
	// (the status and the server's own words, one line, secrets redacted
	// by the client): why requests failed, not only how many.
	ErrorMessages map[string]string `json:"error_messages,omitempty"`
	// Unsustained marks an open-loop level whose queue kept growing while
	// requests arrived (trial.Sustained): the rate is above what the
	// engine serves, whatever its percentiles say. Set by capacity
	// searches over the rate.
	Unsustained          bool    `json:"unsustained,omitempty"`
	TotalInputTokens     int     `json:"total_input_tokens"`
	TotalOutputTokens    int     `json:"total_output_tokens"`
	RequestThroughput    float64 `json:"request_throughput"`
	OutputThroughput     float64 `json:"output_throughput"`
	TotalTokenThroughput float64 `json:"total_token_throughput"`
	PeakOutputThroughput float64 `json:"max_output_tokens_per_s"` // peak 1-second window
	RequestGoodput       float64 `json:"-"`                       // written as request_goodput, null without GoodputSLO
	// MaxConcurrentRequests is the most requests in flight at once
	// (successful ones, [t_send, t_last)), as vLLM counts them.
	MaxConcurrentRequests int     `json:"max_concurrent_requests"`
	MaxConcurrency        int     `json:"-"` // 0 = none; written as max_concurrency, null for none
	RequestRate           float64 `json:"-"` // 0 = inf; written as request_rate, "inf" for 0
	// GoodputSLO is the goodput's limits; nil when none was asked for
	// (every completed request is then good).
	GoodputSLO *SLO `json:"goodput_slo,omitempty"`

	// Latency statistics. Keys are {mean,median,std,p50,p90,p95,p99,p99.9}_{metric}_ms.
	TTFT        Stats `json:"-"`
	TTFTSched   Stats `json:"-"` // TTFT measured from the intended send time
	Queue       Stats `json:"-"` // t_send - t_sched
	TPOT        Stats `json:"-"`
	ITL         Stats `json:"-"` // per chunk
	ITLPerToken Stats `json:"-"`
	E2EL        Stats `json:"-"`
	E2ELSched   Stats `json:"-"` // t_last - t_sched: E2EL with the wait to be sent

	Meta map[string]any `json:"meta,omitempty"`

	// Engine is what the engine reported during the level (its /metrics,
	// or the simulator's state); nil when it was not read.
	Engine *EngineMetrics `json:"engine_metrics,omitempty"`
	// GPU is what NVML saw of the level's GPUs; nil without telemetry.
	GPU *GPUUsage `json:"gpu,omitempty"`
	// Client is the benchmark client's own lateness and CPU during the
	// level, and whether it fell behind; nil where it was not measured
	// (the simulated engine in virtual time, levels stored before).
	Client *Client `json:"client,omitempty"`
	// Conversation is a multi-turn level's own figures; nil for other
	// workloads.
	Conversation *Conversation `json:"conversation,omitempty"`

	// Samples holds the raw values when SummaryOptions.KeepSamples is set.
	Samples *Samples `json:"samples,omitempty"`
	// Detail holds vLLM's per-request lists when SummaryOptions.KeepSamples
	// is set.
	Detail *Detail `json:"-"`
}

// Detail is vLLM's per-request lists (its --save-detailed keys), one entry
// per measured request in send order, failed ones included (zeros and an
// empty list, with the error). Times are seconds, as vLLM writes them;
// StartTimes count from the run's start. servetune keeps no generated
// text: generated_texts is written as empty strings.
type Detail struct {
	InputLens  []int       `json:"input_lens"`
	OutputLens []int       `json:"output_lens"`
	TTFTs      []float64   `json:"ttfts"`
	ITLs       [][]float64 `json:"itls"`
	Latencies  []float64   `json:"latencies"`
	StartTimes []float64   `json:"start_times"`
	QueueTimes []float64   `json:"queue_times"` // t_send - t_sched
	Errors     []string    `json:"errors"`      // "" for success, else "class: message"
}

// Stats summarises one latency metric in milliseconds. MedianCI and P99CI are
// bootstrap 95% confidence intervals.
type Stats struct {
	N        int        `json:"n"`
	Mean     float64    `json:"mean"`
	Median   float64    `json:"median"`
	Std      float64    `json:"std"`
	P50      float64    `json:"p50"`
	P90      float64    `json:"p90"`
	P95      float64    `json:"p95"`
	P99      float64    `json:"p99"`
	P999     float64    `json:"p999"`
	MedianCI [2]float64 `json:"median_ci"`
	P99CI    [2]float64 `json:"p99_ci"`
}

// ms converts a duration to float milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// RequestMetrics are the per-request latencies of one successful record.
type RequestMetrics struct {
	TTFT, TTFTSched, Queue, E2EL float64 // ms
	TPOT                         float64 // ms; NaN when out <= 1
}

// Metrics returns r's latencies by docs/architecture.md's definitions:
// TTFT = t_first - t_send, E2EL = t_last - t_send,
// TPOT = (E2EL - TTFT)/(out - 1) for out > 1, queue = t_send - t_sched.
func (r Record) Metrics() RequestMetrics {
	m := RequestMetrics{
		TTFT:      ms(r.First - r.Send),
		TTFTSched: ms(r.First - r.Sched),
		Queue:     ms(r.Send - r.Sched),
		E2EL:      ms(r.Last - r.Send),
		TPOT:      math.NaN(),
	}
	if r.OutputTokens > 1 {
		m.TPOT = (m.E2EL - m.TTFT) / float64(r.OutputTokens-1)
	}
	return m
}

// Good reports whether m meets every limit of slo (zero = no limit). A
// request with one output token has no TPOT and passes that limit.
func (slo SLO) Good(m RequestMetrics) bool {
	if slo.TTFTms > 0 && m.TTFT > slo.TTFTms {
		return false
	}
	if slo.TPOTms > 0 && !math.IsNaN(m.TPOT) && m.TPOT > slo.TPOTms {
		return false
	}
	if slo.E2ELms > 0 && m.E2EL > slo.E2ELms {
		return false
	}
	return true
}

// Samples are the raw per-request values behind a Summary, kept so that
// `bench compare` can bootstrap differences. Milliseconds.
type Samples struct {
	TTFT []float64 `json:"ttft_ms"`
	TPOT []float64 `json:"tpot_ms"`
	ITL  []float64 `json:"itl_ms"`
	E2EL []float64 `json:"e2el_ms"`
	// ITLCounts is how many of ITL's gaps each request contributed, in
	// order, so compare can resample whole requests: one stream's gaps are
	// not independent draws.
	ITLCounts []int `json:"itl_counts,omitempty"`
}

// Summarize computes a Summary from records. Warm-up records are ignored;
// failed ones are counted by class and excluded from latency metrics.
// Duration runs from the first send to the last completion (t_end) of the
// measured records. It is pure: the simulated engine calls it on records
// built in virtual time.
func Summarize(records []Record, opts SummaryOptions) Summary {
	s := Summary{Errors: make(map[string]int, len(ErrorClasses))}
	for _, c := range ErrorClasses {
		s.Errors[string(c)] = 0 // every class listed, failed or not
	}
	b := opts.Bootstrap
	if b == 0 {
		b = DefaultBootstrap
	}
	rng := rand.New(rand.NewPCG(opts.Seed, 0x5eed))

	if opts.Goodput != (SLO{}) {
		slo := opts.Goodput
		s.GoodputSLO = &slo
	}
	var detail *Detail
	if opts.KeepSamples {
		detail = &Detail{}
	}
	var (
		first, last time.Duration
		seen        bool
		good        int
	)
	l := newLevelSamples(records, opts.Folded != nil)
	for i := range records {
		r := &records[i]
		if r.Warmup {
			continue
		}
		if !seen || r.Send < first {
			first = r.Send
		}
		if !seen || r.End > last {
			last = r.End
		}
		seen = true
		s.NumPrompts++
		if detail != nil {
			detail.add(r)
		}
		if r.Error != ErrNone {
			s.addFailure(r)
			continue
		}
		s.Completed++
		s.TotalInputTokens += r.PromptTokens
		s.TotalOutputTokens += r.OutputTokens
		m := r.Metrics()
		l.add(r, m)
		if opts.Goodput.Good(m) {
			good++
		}
	}
	if !seen {
		return s
	}
	if last < first {
		last = first
	}
	s.setRates(last-first, good)
	if opts.Folded != nil {
		s.PeakOutputThroughput = opts.Folded.peakOutput(first)
	} else {
		s.PeakOutputThroughput = peakOutput(records, first)
	}
	s.MaxConcurrentRequests = peakInFlight(records)
	s.Detail = detail
	l.stats(&s, opts, rng, b)
	return s
}

// levelSamples are a level's per-request latencies (ms), collected in
// request order for its Stats.
type levelSamples struct {
	ttft, ttftSched, queue, tpot, itl, itlTok, e2el, e2elSched []float64
	itlCounts                                                  []int
	folded                                                     bool // the gaps were folded as requests ended (SummaryOptions.Folded)
}

// newLevelSamples sizes the slices once for records: a level of 200,000
// requests, and its hundreds of thousands of gaps, grow no copies.
func newLevelSamples(records []Record, folded bool) *levelSamples {
	n := len(records)
	l := &levelSamples{folded: folded,
		ttft: make([]float64, 0, n), ttftSched: make([]float64, 0, n), queue: make([]float64, 0, n), tpot: make([]float64, 0, n),
		e2el: make([]float64, 0, n), e2elSched: make([]float64, 0, n)}
	if !folded {
		gaps, tokens := 0, 0
		for i := range records {
			if r := &records[i]; !r.Warmup && r.Error == ErrNone {
				for j := 1; j < len(r.Chunks); j++ {
					gaps++
					tokens += max(r.Chunks[j].Tokens, 1)
				}
			}
		}
		l.itl, l.itlTok = make([]float64, 0, gaps), make([]float64, 0, tokens)
	}
	return l
}

// add takes a completed request and its metrics m.
func (l *levelSamples) add(r *Record, m RequestMetrics) {
	l.ttft = append(l.ttft, m.TTFT)
	l.ttftSched = append(l.ttftSched, m.TTFTSched)
	l.queue = append(l.queue, m.Queue)
	l.e2el = append(l.e2el, m.E2EL)
	l.e2elSched = append(l.e2elSched, ms(r.Last-r.Sched))
	if !math.IsNaN(m.TPOT) {
		l.tpot = append(l.tpot, m.TPOT)
	}
	if !l.folded { // else its gaps were folded as it ended
		l.itlCounts = append(l.itlCounts, max(len(r.Chunks)-1, 0))
		l.itl, l.itlTok = appendGaps(l.itl, l.itlTok, r.Chunks)
	}
}

// stats fills s's latency Stats (and its Samples when opts keeps them);
// NewStats sorts the slices in place.
func (l *levelSamples) stats(s *Summary, opts SummaryOptions, rng *rand.Rand, b int) {
	if opts.KeepSamples {
		// Copies taken before NewStats sorts in place: ITL must stay in
		// request order for ITLCounts (compare resamples whole requests).
		s.Samples = &Samples{TTFT: slices.Clone(l.ttft), TPOT: slices.Clone(l.tpot), ITL: slices.Clone(l.itl), E2EL: slices.Clone(l.e2el), ITLCounts: l.itlCounts}
	}
	s.TTFT = NewStats(l.ttft, rng, b)
	s.TTFTSched = NewStats(l.ttftSched, rng, b)
	s.Queue = NewStats(l.queue, rng, b)
	s.TPOT = NewStats(l.tpot, rng, b)
	if f := opts.Folded; f != nil {
		s.ITL = f.itl.stats(rng, b)
		s.ITLPerToken = f.itlTok.stats(rng, b)
	} else {
		s.ITL = NewStats(l.itl, rng, b)
		if len(l.itlTok) == len(l.itl) {
			// One token a chunk (each takes at least one place): the
			// same gaps, sorted once.
			copy(l.itlTok, l.itl)
		}
		s.ITLPerToken = NewStats(l.itlTok, rng, b)
	}
	s.E2EL = NewStats(l.e2el, rng, b)
	s.E2ELSched = NewStats(l.e2elSched, rng, b)
}

// appendGaps appends a request's inter-token gaps (ms) from its chunks
// to itl, and to itlTok each gap split evenly over the tokens its chunk
// brought.
func appendGaps(itl, itlTok []float64, chunks []Chunk) ([]float64, []float64) {
	for j := 1; j < len(chunks); j++ {
		gap := ms(chunks[j].At - chunks[j-1].At)
		itl = append(itl, gap)
		k := max(chunks[j].Tokens, 1)
		for range k {
			itlTok = append(itlTok, gap/float64(k))
		}
	}
	return itl, itlTok
}

// addFailure counts failed record r by its class, keeping the class's
// first message.
func (s *Summary) addFailure(r *Record) {
	s.Failed++
	s.Errors[string(r.Error)]++
	if _, ok := s.ErrorMessages[string(r.Error)]; !ok && r.ErrorMsg != "" {
		if s.ErrorMessages == nil {
			s.ErrorMessages = map[string]string{}
		}
		s.ErrorMessages[string(r.Error)] = r.ErrorMsg
	}
}

// setRates sets the duration and the throughputs over it (none over a
// zero duration); good is the requests that met the goodput SLO.
func (s *Summary) setRates(d time.Duration, good int) {
	s.Duration = d.Seconds()
	if s.Duration > 0 {
		s.RequestThroughput = float64(s.Completed) / s.Duration
		s.OutputThroughput = float64(s.TotalOutputTokens) / s.Duration
		s.TotalTokenThroughput = float64(s.TotalInputTokens+s.TotalOutputTokens) / s.Duration
		s.RequestGoodput = float64(good) / s.Duration
	}
}

// add appends measured record r to d.
func (d *Detail) add(r *Record) {
	sec := func(t time.Duration) float64 { return t.Seconds() }
	d.InputLens = append(d.InputLens, r.PromptTokens)
	d.StartTimes = append(d.StartTimes, sec(r.Send))
	d.QueueTimes = append(d.QueueTimes, sec(r.Send-r.Sched))
	if r.Error != ErrNone {
		d.OutputLens = append(d.OutputLens, 0)
		d.TTFTs = append(d.TTFTs, 0)
		d.ITLs = append(d.ITLs, []float64{})
		d.Latencies = append(d.Latencies, 0)
		msg := string(r.Error)
		if r.ErrorMsg != "" {
			msg += ": " + r.ErrorMsg
		}
		d.Errors = append(d.Errors, msg)
		return
	}
	gaps := make([]float64, 0, max(len(r.Chunks)-1, 0))
	for j := 1; j < len(r.Chunks); j++ {
		gaps = append(gaps, sec(r.Chunks[j].At-r.Chunks[j-1].At))
	}
	d.OutputLens = append(d.OutputLens, r.OutputTokens)
	d.TTFTs = append(d.TTFTs, sec(r.First-r.Send))
	d.ITLs = append(d.ITLs, gaps)
	d.Latencies = append(d.Latencies, sec(r.Last-r.Send))
	d.Errors = append(d.Errors, "")
}

// peakInFlight is the most successful measured requests in flight at
// once, each over [t_send, t_last) (an end before a start at a tie), as
// vLLM's max_concurrent_requests.
func peakInFlight(records []Record) int {
	type ev struct {
		at    time.Duration
		delta int
	}
	var evs []ev
	for i := range records {
		r := &records[i]
		if r.Warmup || r.Error != ErrNone {
			continue
		}
		evs = append(evs, ev{r.Send, 1}, ev{r.Last, -1})
	}
	slices.SortFunc(evs, func(a, b ev) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		return cmp.Compare(a.delta, b.delta)
	})
	cur, peak := 0, 0
	for _, e := range evs {
		cur += e.delta
		peak = max(peak, cur)
	}
	return peak
}

// peakOutput is the largest number of output tokens received in one
// 1-second window [k, k+1) s after the first send, from chunk arrival times.
func peakOutput(records []Record, first time.Duration) float64 {
	// By second from first: a chunk before first (none is: first is the
	// earliest send) would take the map.
	var seconds []int
	var before map[int64]int
	for i := range records {
		r := &records[i]
		if r.Warmup || r.Error != ErrNone {
			continue
		}
		for _, c := range r.Chunks {
			k := int64((c.At - first) / time.Second)
			if k < 0 {
				if before == nil {
					before = map[int64]int{}
				}
				before[k] += c.Tokens
				continue
			}
			for int64(len(seconds)) <= k {
				seconds = append(seconds, 0)
			}
			seconds[k] += c.Tokens
		}
	}
	peak := 0
	for _, v := range seconds {
		peak = max(peak, v)
	}
	for _, v := range before {
		peak = max(peak, v)
	}
	return float64(peak)
}

// DominantError is the failure class with the most failed requests (ties
// go to report order) with its count and first message; class is "" when
// nothing failed.
func (s *Summary) DominantError() (class string, n int, msg string) {
	for _, c := range ErrorClasses {
		if k := s.Errors[string(c)]; k > n {
			class, n = string(c), k
		}
	}
	return class, n, s.ErrorMessages[class]
}
