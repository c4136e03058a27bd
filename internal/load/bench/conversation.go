package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/load/trace"
)

// Think-time kinds (ThinkTime.Kind).
const (
	ThinkFixed       = "fixed"
	ThinkUniform     = "uniform"
	ThinkExponential = "exponential"
	ThinkLognormal   = "lognormal"
)

// maxThink bounds a think time: a day.
const maxThink = 24 * 3600.0

// ThinkTime is the wait, in seconds, between an answer and the user's next
// turn.
type ThinkTime struct {
	Kind   string  `json:"kind"` // fixed | uniform | exponential | lognormal
	Value  float64 `json:"value,omitempty"`
	Min    float64 `json:"min,omitempty"`
	Max    float64 `json:"max,omitempty"`
	Mean   float64 `json:"mean,omitempty"`
	Median float64 `json:"median,omitempty"`
	Sigma  float64 `json:"sigma,omitempty"`
}

// ParseThinkTime reads a think-time distribution; each time is seconds
// (2, 0.5) or a duration (2s, 500ms):
//
//	2s                             fixed
//	fixed:2s                       fixed
//	uniform:1s,5s                  uniform on [1 s, 5 s]
//	exponential:mean=3s            exponential (exp: also works)
//	lognormal:median=2s,sigma=0.5  lognormal
func ParseThinkTime(s string) (ThinkTime, error) {
	s = strings.TrimSpace(s)
	kind, args, ok := strings.Cut(s, ":")
	var t ThinkTime
	if !ok {
		v, err := seconds(s)
		if err != nil {
			return t, fmt.Errorf("%w: %q: want SECONDS, fixed:S, uniform:A,B, exponential:mean=S or lognormal:median=S,sigma=X", ErrBadThink, s)
		}
		t = ThinkTime{Kind: ThinkFixed, Value: v}
		return t, t.Validate()
	}
	switch kind {
	case ThinkFixed:
		v, err := seconds(args)
		if err != nil {
			return t, fmt.Errorf("%w: fixed: %v", ErrBadThink, err)
		}
		t = ThinkTime{Kind: ThinkFixed, Value: v}
	case ThinkUniform:
		a, b, ok := strings.Cut(args, ",")
		lo, err1 := seconds(a)
		hi, err2 := seconds(b)
		if !ok || err1 != nil || err2 != nil {
			return t, fmt.Errorf("%w: uniform: want uniform:MIN,MAX, got %q", ErrBadThink, args)
		}
		t = ThinkTime{Kind: ThinkUniform, Min: lo, Max: hi}
	case ThinkExponential, "exp", ThinkLognormal:
		t.Kind = kind
		if kind == "exp" {
			t.Kind = ThinkExponential
		}
		for _, kv := range strings.Split(args, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok {
				return ThinkTime{}, fmt.Errorf("%w: %s: %q is not key=value", ErrBadThink, kind, kv)
			}
			var err error
			switch k {
			case "mean":
				t.Mean, err = seconds(v)
			case "median":
				t.Median, err = seconds(v)
			case "sigma":
				t.Sigma, err = strconv.ParseFloat(strings.TrimSpace(v), 64)
			default:
				return ThinkTime{}, fmt.Errorf("%w: %s: unknown key %q", ErrBadThink, kind, k)
			}
			if err != nil {
				return ThinkTime{}, fmt.Errorf("%w: %s: %s=%q is not a time", ErrBadThink, kind, k, v)
			}
		}
	default:
		return t, fmt.Errorf("%w: unknown kind %q (fixed, uniform, exponential, lognormal)", ErrBadThink, kind)
	}
	return t, t.Validate()
}

// seconds reads "2", "0.5" (seconds) or a duration ("2s", "500ms").
func seconds(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		return v, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not seconds or a duration", s)
	}
	return d.Seconds(), nil
}

// Validate reports a think time that cannot give waits of 0 to a day.
func (t ThinkTime) Validate() error {
	for _, v := range []float64{t.Value, t.Min, t.Max, t.Mean, t.Median} {
		if v < 0 || v > maxThink || math.IsNaN(v) {
			return fmt.Errorf("%w: %gs: want 0 to %.0f s", ErrBadThink, v, maxThink)
		}
	}
	if t.Sigma < 0 || t.Sigma > 10 || math.IsNaN(t.Sigma) {
		return fmt.Errorf("%w: sigma %g: want 0 to 10", ErrBadThink, t.Sigma)
	}
	switch t.Kind {
	case ThinkFixed:
	case ThinkUniform:
		if t.Max < t.Min {
			return fmt.Errorf("%w: uniform:%g,%g needs MIN <= MAX", ErrBadThink, t.Min, t.Max)
		}
	case ThinkExponential:
		if t.Mean <= 0 {
			return fmt.Errorf("%w: exponential needs mean > 0", ErrBadThink)
		}
	case ThinkLognormal:
		if t.Median <= 0 {
			return fmt.Errorf("%w: lognormal needs median > 0", ErrBadThink)
		}
	default:
		return fmt.Errorf("%w: unknown kind %q", ErrBadThink, t.Kind)
	}
	return nil
}

// String renders t in ParseThinkTime's syntax.
func (t ThinkTime) String() string {
	switch t.Kind {
	case ThinkUniform:
		return fmt.Sprintf("uniform:%gs,%gs", t.Min, t.Max)
	case ThinkExponential:
		return fmt.Sprintf("exponential:mean=%gs", t.Mean)
	case ThinkLognormal:
		return fmt.Sprintf("lognormal:median=%gs,sigma=%g", t.Median, t.Sigma)
	}
	return fmt.Sprintf("%gs", t.Value)
}

// dist is t as the trace generator's distribution (internal/load/trace/conversation.go).
func (t *ThinkTime) dist() trace.Dist {
	if t == nil {
		return trace.Fixed(0)
	}
	switch t.Kind {
	case ThinkUniform:
		return trace.Uniform{Min: t.Min, Max: t.Max}
	case ThinkExponential:
		return trace.Exponential{Mean: t.Mean}
	case ThinkLognormal:
		return trace.LogNormal{Median: t.Median, Sigma: t.Sigma}
	}
	return trace.Fixed(t.Value)
}

// tokenDist is a length distribution as the trace generator's.
type tokenDist struct{ d Dist }

func (t tokenDist) Sample(r *rand.Rand) float64 { return float64(t.d.Sample(r)) }

// validateConversation checks a conversation dataset's own fields.
func (d DatasetSpec) validateConversation() error {
	if d.Sessions < 1 {
		return fmt.Errorf("%w: conversation needs sessions >= 1 (have %d)", ErrBadDataset, d.Sessions)
	}
	if d.Path != "" {
		// A ShareGPT file's conversations (shareGPTSessions): their own
		// turns and messages.
		if d.Turns != nil {
			return fmt.Errorf("%w: conversation from a file (%s) takes no turns: each conversation has its own", ErrBadDataset, d.Path)
		}
		if d.Sessions > MaxRequests {
			return fmt.Errorf("%w: %d sessions is over %d requests per level", ErrBadDataset, d.Sessions, MaxRequests)
		}
		if d.Think != nil {
			return d.Think.Validate()
		}
		return nil
	}
	if d.Turns == nil {
		return fmt.Errorf("%w: conversation needs turns (N or a distribution)", ErrBadDataset)
	}
	if err := d.Turns.Validate(); err != nil {
		return fmt.Errorf("turns: %w", err)
	}
	if err := d.Input.Validate(); err != nil {
		return fmt.Errorf("input: %w", err)
	}
	if d.Think != nil {
		if err := d.Think.Validate(); err != nil {
			return err
		}
	}
	if most := float64(d.Sessions) * d.turnsBound(); most > MaxRequests {
		return fmt.Errorf("%w: %d sessions of up to %.0f turns is over %d requests per level", ErrBadDataset, d.Sessions, d.turnsBound(), MaxRequests)
	}
	return nil
}

// turnsBound is the most turns a session may have.
func (d DatasetSpec) turnsBound() float64 {
	t := d.Turns
	switch {
	case t.Kind == DistFixed || t.Kind == "":
		return float64(t.Value)
	case t.Max > 0:
		return float64(t.Max)
	case t.Kind == DistUniform:
		return float64(t.Max)
	}
	return 1000 // an unclipped lognormal or normal: clipped here
}

// MostTurns is the most turns a session of a conversation dataset of
// synthetic sessions may have (its turns distribution's bound, clipped
// at 1,000); 0 for one from a file, whose conversations have their own.
func (d DatasetSpec) MostTurns() int {
	if d.Turns == nil {
		return 0
	}
	return int(min(d.turnsBound(), maxTurns))
}

// maxTurns clips the turns of an unclipped distribution.
const maxTurns = 1000

// streamTurns is the seeded stream of each session's turn count.
const streamTurns = 5

// convSession is one session of a conversation level: its turns, as
// indices into the level's requests (each the turn's new user message),
// and the think time before each (0 before the first).
type convSession struct {
	turns []int
	think []time.Duration
	// lazy, when set, is the session's plan whose messages are built
	// when the session starts (their requests' prompts are empty until
	// then): a level of more than eagerTurns turns.
	lazy *trace.Session
}

// eagerTurns is the most turns a conversation level builds before it
// runs, so that the server's /tokenize aligns their lengths; a larger
// level builds each session's messages when the session starts, their
// lengths as the word list gives them (the figures count the server's
// usage either way), so that memory holds the sessions in flight: 200,000
// turns built up front took 3.9 GB.
const eagerTurns = countPool

// conversation builds cfg's sessions and their turns' requests from the
// trace generator (trace.Conversations), deterministic in cfg.Seed, and
// warm-up requests shaped as first turns. A request's PromptTokens is its
// new message's length; its MaxTokens the answer's.
func (cfg Config) conversation(text bool) (sessions []convSession, reqs, warm []measure.Request, err error) {
	d := cfg.Dataset
	if d.Path != "" {
		return cfg.shareGPTConversation(text)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, streamTurns))
	counts := make([]int, d.Sessions)
	most := 1
	for s := range counts {
		counts[s] = min(d.Turns.Sample(rng), maxTurns)
		most = max(most, counts[s])
	}
	plan, err := trace.Conversations(trace.ConversationSpec{
		Sessions: d.Sessions, Turns: most, Input: tokenDist{d.Input}, Output: tokenDist{d.Output},
		Think: d.Think.dist(), Seed: cfg.Seed,
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: %v", ErrBadDataset, err)
	}
	total := 0
	for _, n := range counts {
		total += n
	}
	eager := total <= eagerTurns
	sessions = make([]convSession, len(plan))
	reqs = make([]measure.Request, 0, total)
	for s := range plan {
		plan[s].Turns = plan[s].Turns[:counts[s]] // drawn in turn order: the rest is never built
		p := plan[s]
		if text && eager {
			p = p.Build()
		} else if text {
			sessions[s].lazy = &plan[s]
		}
		sessions[s].turns = make([]int, 0, len(p.Turns))
		sessions[s].think = make([]time.Duration, 0, len(p.Turns))
		for _, t := range p.Turns {
			r := measure.Request{Index: len(reqs), PromptTokens: t.New, MaxTokens: t.Output, PrefixID: -1, Synthetic: eager}
			if text && eager {
				r.Prompt = trace.Text(t.Message)
			}
			sessions[s].turns = append(sessions[s].turns, len(reqs))
			sessions[s].think = append(sessions[s].think, t.Think)
			reqs = append(reqs, r)
		}
	}
	if cfg.Warmup > 0 {
		first := DatasetSpec{Kind: DatasetRandom, Input: d.Input, Output: d.Output}
		gen := first.GenerateLengths
		if text {
			gen = first.Generate
		}
		if warm, err = gen(rand.New(rand.NewPCG(cfg.Seed, streamWarmup)), min(cfg.Warmup, countPool)); err != nil {
			return nil, nil, nil, err
		}
	}
	return sessions, reqs, warm, nil
}

// conversationLengths is each turn as the server sees it, its prompt the
// whole history with every answer at its full length: what checkLengths
// holds against the server's context.
func (cfg Config) conversationLengths() ([]measure.Request, error) {
	sessions, reqs, _, err := cfg.conversation(false)
	if err != nil {
		return nil, err
	}
	out := make([]measure.Request, 0, len(reqs))
	for _, s := range sessions {
		history := 0
		for _, i := range s.turns {
			r := reqs[i]
			r.PromptTokens += history
			history = r.PromptTokens + r.MaxTokens
			out = append(out, r)
		}
	}
	return out, nil
}

// turnBody encodes one turn: the whole history as chat messages, or on the
// completions API as one text (each user message on a new line after the
// answer before it).
func (c *client) turnBody(history []chatMessage, maxTokens int) ([]byte, error) {
	b := c.newBody()
	if c.target.Chat() {
		b.Messages = history
		b.MaxCompletionTokens = maxTokens
		return json.Marshal(b)
	}
	var p strings.Builder
	for i, m := range history {
		if i > 0 && m.Role == "user" {
			p.WriteByte('\n')
		}
		p.WriteString(m.Content)
	}
	b.Prompt = p.String()
	b.MaxTokens = maxTokens
	return json.Marshal(b)
}

// converse runs a conversation level. Sessions start on p's schedule
// (p.Next), at most p.MaxConcurrency at once when set; each sends its
// turns in order, a turn's prompt the whole history with the answers the
// server streamed, the next one its think time (divided by scale, the
// engine's speed-up) after the answer ends. A failed turn ends its
// session. Records come back in request order, one per turn sent.
func (h *httpTransport) converse(ctx context.Context, p measure.Phase, sessions []convSession, reqs []measure.Request, scale float64) ([]measure.Record, time.Time) {
	start := time.Now()
	pace := newPacer(p, start)
	defer pace.stop()
	h.stopped = ""
	// This machine out of file descriptors stops the level, as it stops
	// any other (collect): no more sessions start, those in flight end.
	ctx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	live := newInflight()
	defer live.watch(p.Waiting)()
	// Each turn's record goes to its request's place, so the level holds
	// one record a turn and no copy of them (200,000 turns).
	var (
		mu    sync.Mutex
		recs  = make([]measure.Record, len(reqs))
		late  = make([]time.Duration, len(reqs))
		got   = make([]bool, len(reqs))
		count int
	)
	finish := func(s sent) {
		mu.Lock()
		defer mu.Unlock()
		if p.Done != nil {
			p.Done(&s.rec)
		}
		recs[s.seq], late[s.seq], got[s.seq] = s.rec, s.late, true
		count++
		if h.stopped == "" && s.rec.Error == measure.ErrConnect && strings.HasPrefix(s.rec.ErrorMsg, outOfFiles) {
			h.stopped = s.rec.ErrorMsg
			stopAll()
		}
		if p.Progress != nil {
			p.Progress(count, len(reqs))
		}
	}
	var wg sync.WaitGroup
	for _, sess := range sessions {
		sched := pace.next()
		ready, ok := pace.admit(ctx, sched)
		if !ok {
			break
		}
		wg.Go(func() {
			h.session(ctx, p, sess, reqs, scale, start, sched, ready, live, finish)
			pace.free()
		})
	}
	wg.Wait()
	n := 0
	for i := range recs {
		if got[i] {
			recs[n], late[n] = recs[i], late[i]
			n++
		}
	}
	clear(recs[n:])
	h.late = late[:n]
	return recs[:n], start
}

// session sends one session's turns (converse).
func (h *httpTransport) session(ctx context.Context, p measure.Phase, sess convSession, reqs []measure.Request, scale float64,
	start time.Time, sched, ready time.Duration, live *inflight, finish func(sent)) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var messages []string // a lazy session's, built now
	if sess.lazy != nil {
		b := sess.lazy.Build()
		for _, t := range b.Turns {
			messages = append(messages, trace.Text(t.Message))
		}
	}
	var history []chatMessage
	for k, i := range sess.turns {
		if k > 0 {
			sched = time.Since(start) + time.Duration(float64(sess.think[k])/scale)
			ready = sched
			if !sleepUntil(ctx, timer, start.Add(sched)) {
				return // cancelled: the rest is not sent
			}
		}
		req := reqs[i]
		if messages != nil {
			req.Prompt = messages[k]
		}
		history = append(history, chatMessage{Role: "user", Content: req.Prompt})
		body, bodyErr := h.c.turnBody(history, req.MaxTokens)
		rec := measure.Record{Sched: sched}
		var answer strings.Builder
		live.add(i)
		h.c.sendTo(ctx, req, body, bodyErr, start, p.Timeout, &rec, &answer)
		live.remove(i)
		finish(sent{seq: i, rec: rec, late: max(rec.Send-ready, 0)})
		if rec.Error != measure.ErrNone {
			return
		}
		history = append(history, chatMessage{Role: "assistant", Content: answer.String()})
	}
}

// converses reports whether tr runs a conversation's sessions itself
// (measure.Converser: the simulated engine's virtual clock).
func converses(tr measure.Transport) bool {
	c, ok := tr.(measure.Converser)
	return ok && c.Converses()
}

// streamSessions keys the sessions' content (measure.Session.Key).
const streamSessions = 6

// closedLoop is p as a transport that Converses runs it: the sessions'
// turns (reqs, each its new message's length), their think times, and
// each session's key, the seed and its index, as its messages' content
// is (trace.Session.Build).
func closedLoop(p measure.Phase, sessions []convSession, reqs []measure.Request, seed uint64) measure.Phase {
	p.Count = len(reqs)
	p.Request = func(i int) measure.Request {
		r := reqs[i]
		r.Index = i
		return r
	}
	p.Sessions = make([]measure.Session, len(sessions))
	for s, sess := range sessions {
		h := fnv.New64a()
		fmt.Fprintf(h, "%d/%d/%d", seed, streamSessions, s)
		p.Sessions[s] = measure.Session{Turns: sess.turns, Think: sess.think, Key: int(h.Sum64() >> 2)}
	}
	return p
}

// summarizeConversation is a conversation level's own figures from its
// records (in the engine's time, as summarize left them): per turn index,
// per session, and each answered turn's prompt split into its history
// (the previous turn's prompt and answer, as the server counted them) and
// what is new.
func summarizeConversation(sessions []convSession, records []measure.Record, engine *measure.EngineMetrics) *measure.Conversation {
	// The measured records are in request order (converse): a turn's
	// is found by its index without a map of 200,000 entries.
	var measured []measure.Record
	if first := slices.IndexFunc(records, func(r measure.Record) bool { return !r.Warmup }); first >= 0 {
		measured = records[first:]
	}
	byIdx := func(a, b measure.Record) int { return a.Index - b.Index }
	if !slices.IsSortedFunc(measured, byIdx) || slices.ContainsFunc(measured, func(r measure.Record) bool { return r.Warmup }) {
		measured = slices.DeleteFunc(slices.Clone(measured), func(r measure.Record) bool { return r.Warmup })
		slices.SortFunc(measured, byIdx)
	}
	byIndex := func(i int) *measure.Record {
		k, ok := slices.BinarySearchFunc(measured, i, func(r measure.Record, i int) int { return r.Index - i })
		if !ok {
			return nil
		}
		return &measured[k]
	}
	c := &measure.Conversation{Sessions: len(sessions)}
	if engine != nil {
		c.PrefixCacheHitRate = engine.PrefixCacheHitRate
	}
	type turnAcc struct {
		ttft, e2el       []float64
		in, reused       float64
		sent, ok, failed int
	}
	var turns []turnAcc
	var latency []float64
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	for _, s := range sessions {
		var prev, first *measure.Record
		complete := true
		for k, i := range s.turns {
			for len(turns) <= k {
				turns = append(turns, turnAcc{})
			}
			r := byIndex(i)
			if r == nil {
				c.TurnsNotSent++
				complete = false
				continue
			}
			t := &turns[k]
			t.sent++
			if first == nil {
				first = r
			}
			if r.Error != measure.ErrNone {
				t.failed++
				complete = false
				prev = nil
				continue
			}
			t.ok++
			reused := 0
			if prev != nil {
				reused = min(prev.PromptTokens+prev.OutputTokens, r.PromptTokens)
			}
			c.ReusedInputTokens += reused
			c.NewInputTokens += r.PromptTokens - reused
			t.in += float64(r.PromptTokens)
			t.reused += float64(reused)
			t.ttft = append(t.ttft, ms(r.First-r.Send))
			t.e2el = append(t.e2el, ms(r.Last-r.Send))
			prev = r
		}
		switch {
		case complete && first != nil:
			c.SessionsCompleted++
			latency = append(latency, ms(prev.Last-first.Send))
		case first != nil:
			c.SessionsFailed++
		}
	}
	if all := c.NewInputTokens + c.ReusedInputTokens; all > 0 {
		c.ReusedShare = float64(c.ReusedInputTokens) / float64(all)
	}
	if len(latency) > 0 {
		sum := 0.0
		for _, l := range latency {
			sum += l
		}
		c.MeanSessionMS = sum / float64(len(latency))
		c.MedianSessionMS = measure.Median(latency)
		c.P99SessionMS = measure.PercentileOf(latency, 99)
	}
	for k, t := range turns {
		row := measure.Turn{Turn: k + 1, Sent: t.sent, Completed: t.ok, Failed: t.failed}
		if t.ok > 0 {
			row.MeanInputTokens = t.in / float64(t.ok)
			row.MeanReusedTokens = t.reused / float64(t.ok)
			row.MedianTTFTMS, row.P99TTFTMS = measure.Median(t.ttft), measure.PercentileOf(t.ttft, 99)
			row.MedianE2ELMS, row.P99E2ELMS = measure.Median(t.e2el), measure.PercentileOf(t.e2el, 99)
		}
		c.Turns = append(c.Turns, row)
	}
	return c
}
