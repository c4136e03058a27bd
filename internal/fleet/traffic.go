package fleet

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/servetune/servetune/internal/load/trace"
)

// Curve is a traffic's rate over time: Rates[k] requests per second at
// k x Step seconds from the start, linear in between, the last held
// for one more step. Rates are relative when the caller scales them
// (Curve.Scaled).
type Curve struct {
	Step  float64
	Rates []float64
}

// DayShape is a day of interactive LLM traffic, hour by hour from
// midnight local time, relative to the day's mean (the 24 values
// average 1). It is servetune's reading of the daily shape of the Azure
// LLM inference trace 2024 (Azure/AzurePublicDataset,
// AzureLLMInferenceDataset2024.md: a week of Azure's conversation and
// coding services, May 2024, analysed in DynamoLLM, HPCA 2025): a
// night trough near a third of the peak, a morning ramp from 06:00, a
// working-day plateau with its peak around 10:00 to 15:00 and an
// evening decline. The values are approximate, read off the published
// daily pattern, not computed from the trace's rows.
var DayShape = []float64{
	0.45, 0.40, 0.37, 0.36, 0.38, 0.45, 0.62, 0.88,
	1.18, 1.40, 1.52, 1.58, 1.55, 1.55, 1.58, 1.52,
	1.40, 1.25, 1.12, 1.02, 0.92, 0.80, 0.66, 0.54,
}

// Day is DayShape as a curve whose mean over the day is mean requests
// per second.
func Day(mean float64) Curve {
	return Curve{Step: 3600, Rates: scaled(DayShape, mean)}
}

// scaled multiplies rates so that their mean is mean.
func scaled(rates []float64, mean float64) []float64 {
	sum := 0.0
	for _, r := range rates {
		sum += r
	}
	out := make([]float64, len(rates))
	for i, r := range rates {
		out[i] = r * mean * float64(len(rates)) / sum
	}
	return out
}

// Scaled is c with its rates multiplied so that their mean is mean.
func (c Curve) Scaled(mean float64) Curve { return Curve{Step: c.Step, Rates: scaled(c.Rates, mean)} }

// Span is the curve's length in seconds.
func (c Curve) Span() float64 { return c.Step * float64(len(c.Rates)) }

// At is the rate at t seconds.
func (c Curve) At(t float64) float64 {
	k := int(t / c.Step)
	if k < 0 || k >= len(c.Rates) {
		return 0
	}
	if k+1 == len(c.Rates) {
		return c.Rates[k]
	}
	x := t/c.Step - float64(k)
	return c.Rates[k]*(1-x) + c.Rates[k+1]*x
}

// MaxCurvePoints bounds a rate curve file's points (a week at one a
// minute).
const MaxCurvePoints = 7 * 24 * 60

// ReadCurve reads a rate curve: one "SECONDS,RATE" line per point (#
// comments are skipped), the offsets evenly spaced
// from 0, the rates in requests per second (relative when the caller
// scales them); one header line before the first point is skipped.
// name is the file's name in errors.
func ReadCurve(r io.Reader, name string) (Curve, error) {
	sc := bufio.NewScanner(io.LimitReader(r, 1<<20))
	var at, rates []float64
	line, header := 0, false
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		a, b, ok := strings.Cut(s, ",")
		t, err1 := strconv.ParseFloat(strings.TrimSpace(a), 64)
		v, err2 := strconv.ParseFloat(strings.TrimSpace(b), 64)
		if !ok || err1 != nil || err2 != nil {
			if len(at) == 0 && !header {
				header = true
				continue // a header
			}
			return Curve{}, fmt.Errorf("%s:%d: want SECONDS,RATE", name, line)
		}
		if !(v >= 0) || math.IsInf(v, 0) || t < 0 || math.IsInf(t, 0) {
			return Curve{}, fmt.Errorf("%s:%d: the offset and rate must be non-negative numbers", name, line)
		}
		if len(at) == MaxCurvePoints {
			return Curve{}, fmt.Errorf("%s:%d: over %d points", name, line, MaxCurvePoints)
		}
		at, rates = append(at, t), append(rates, v)
	}
	if err := sc.Err(); err != nil {
		return Curve{}, fmt.Errorf("%s: %w", name, err)
	}
	if len(at) < 2 {
		return Curve{}, fmt.Errorf("%s: want at least 2 points", name)
	}
	step := at[1] - at[0]
	for k := range at {
		if math.Abs(at[k]-float64(k)*step-at[0]) > 1e-6*step || !(step > 0) || at[0] != 0 {
			return Curve{}, fmt.Errorf("%s: the offsets must start at 0 and be evenly spaced (point %d at %g s, step %g s)", name, k+1, at[k], step)
		}
	}
	if slices.Max(rates) == 0 {
		return Curve{}, fmt.Errorf("%s: every rate is 0", name)
	}
	return Curve{Step: step, Rates: rates}, nil
}

// Arrivals are a Poisson process following the curve (by thinning:
// candidates at the curve's highest rate, each kept with the rate at
// its time over that), in seconds from 0, at most max of them.
func (c Curve) Arrivals(rng *rand.Rand, maxN int) ([]float64, error) {
	peak := slices.Max(c.Rates)
	if !(peak > 0) {
		return nil, errors.New("the rate curve is 0 throughout")
	}
	var out []float64
	span := c.Span()
	for t := rng.ExpFloat64() / peak; t < span; t += rng.ExpFloat64() / peak {
		if rng.Float64()*peak < c.At(t) {
			if len(out) == maxN {
				return nil, fmt.Errorf("the curve holds over %d requests", maxN)
			}
			out = append(out, t)
		}
	}
	return out, nil
}

// Lengths are the prompt and output length distributions of
// single-turn traffic: log-normal, with the medians of the Azure LLM
// inference trace 2023's conversation service (1,020 prompt tokens and
// 129 output tokens; Splitwise, ISCA 2024) and a spread of a factor of
// e at one sigma.
type Lengths struct {
	InputMedian, OutputMedian float64
	Sigma                     float64
	MaxInput, MaxOutput       int
}

// AzureConversation are the Azure conversation trace's lengths.
var AzureConversation = Lengths{InputMedian: 1020, OutputMedian: 129, Sigma: 1, MaxInput: 8000, MaxOutput: 2000}

func logNormal(rng *rand.Rand, median, sigma float64, lo, hi int) int32 {
	v := int(math.Round(median * math.Exp(sigma*rng.NormFloat64())))
	return int32(min(max(v, lo), hi))
}

// MaxRequests bounds the requests one plan holds (about 40 bytes each).
const MaxRequests = 20_000_000

// Independent is single-turn traffic on the curve: each request's
// lengths drawn from l, nothing shared between them.
func Independent(c Curve, l Lengths, seed uint64) ([]Request, error) {
	rng := rand.New(rand.NewPCG(seed, 0x6a1))
	at, err := c.Arrivals(rng, MaxRequests)
	if err != nil {
		return nil, err
	}
	out := make([]Request, len(at))
	for i, t := range at {
		out[i] = Request{At: t, PrefixID: -1,
			Prompt: logNormal(rng, l.InputMedian, l.Sigma, 1, l.MaxInput),
			Output: logNormal(rng, l.OutputMedian, l.Sigma, 1, l.MaxOutput)}
	}
	return out, nil
}

// Chat describes multi-turn conversations: sessions start on a curve of
// requests per second (divided by the mean turns, so the curve is the
// requests' rate); each has between MinTurns and MaxTurns turns, the
// user thinking a log-normal time (median Think seconds) after each
// answer, which streams at AnswerSecondsPerToken; each turn's prompt is
// one of SystemPrompts system prompts of SystemTokens, every earlier
// message and answer, and its new message.
type Chat struct {
	MinTurns, MaxTurns    int
	Think                 float64
	AnswerSecondsPerToken float64
	Message, Answer       float64 // medians, tokens
	Sigma                 float64
	SystemPrompts         int
	SystemTokens          int
	MaxContext, MaxAnswer int
}

// DefaultChat is a chat service's conversations: 2 to 8 turns, half a
// minute of thought between them, messages of about 150 tokens and
// answers of about 250, 4 system prompts of 512 tokens, contexts up to
// 16,000 tokens.
var DefaultChat = Chat{MinTurns: 2, MaxTurns: 8, Think: 30, AnswerSecondsPerToken: 0.02,
	Message: 150, Answer: 250, Sigma: 0.7, SystemPrompts: 4, SystemTokens: 512, MaxContext: 16000, MaxAnswer: 1024}

// Conversations is multi-turn traffic on the curve (Chat), in arrival
// order. Every turn of session s reads session s's content: its
// PrefixID is s, its PrefixTokens its prompt and answer (the next turn
// sends both back), its GroupID the session's system prompt.
func Conversations(c Curve, ch Chat, seed uint64) ([]Request, error) {
	if ch.MinTurns < 1 || ch.MaxTurns < ch.MinTurns || ch.SystemPrompts < 1 {
		return nil, fmt.Errorf("conversations: want 1 <= min turns <= max turns and a system prompt")
	}
	rng := rand.New(rand.NewPCG(seed, 0xc0))
	mean := float64(ch.MinTurns+ch.MaxTurns) / 2
	starts, err := Curve{Step: c.Step, Rates: scaled(c.Rates, avg(c.Rates)/mean)}.Arrivals(rng, MaxRequests)
	if err != nil {
		return nil, err
	}
	var out []Request
	for s, t := range starts {
		sys := rng.IntN(ch.SystemPrompts)
		ctx := ch.SystemTokens
		turns := ch.MinTurns + rng.IntN(ch.MaxTurns-ch.MinTurns+1)
		for k := 0; k < turns; k++ {
			msg := int(logNormal(rng, ch.Message, ch.Sigma, 1, ch.MaxContext))
			ans := logNormal(rng, ch.Answer, ch.Sigma, 1, ch.MaxAnswer)
			prompt := ctx + msg
			if prompt+int(ans) > ch.MaxContext {
				break // the conversation outgrew the context
			}
			if len(out) == MaxRequests {
				return nil, fmt.Errorf("the conversations hold over %d requests", MaxRequests)
			}
			out = append(out, Request{At: t, Prompt: int32(prompt), Output: ans, PrefixID: int64(s),
				PrefixTokens: int32(prompt) + ans, GroupID: int32(sys), GroupTokens: int32(ch.SystemTokens)})
			ctx = prompt + int(ans)
			t += float64(ans)*ch.AnswerSecondsPerToken + ch.Think*math.Exp(ch.Sigma*rng.NormFloat64())
		}
	}
	slices.SortStableFunc(out, func(a, b Request) int {
		switch {
		case a.At < b.At:
			return -1
		case a.At > b.At:
			return 1
		}
		return 0
	})
	return out, nil
}

func avg(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

// FromTrace is a trace's requests (internal/load/trace) as the fleet's.
// A request with hash ids shares content with the requests its leading
// blocks repeat: its prefix is the longest leading run of blocks that
// another request of the trace also starts with, named by the run's
// first block (so the turns of one conversation, whose runs grow turn
// by turn, read one content). Runs that begin alike and part later are
// taken as alike up to the shorter run's length.
func FromTrace(tr []trace.Request) []Request {
	runs, _ := trace.SharedRuns(tr)
	out := make([]Request, len(tr))
	for i, q := range tr {
		out[i] = Request{At: q.Offset.Seconds(), Prompt: int32(max(q.Input, 1)), Output: int32(max(q.Output, 1)), PrefixID: -1}
		if runs[i] > 0 {
			out[i].PrefixID = q.HashIDs[0]&math.MaxInt32 | 1<<40
			out[i].PrefixTokens = int32(min(runs[i]*q.BlockSize, max(q.Input, 1)))
		}
	}
	return out
}
