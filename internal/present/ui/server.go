package ui

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"math"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/servetune/servetune/internal/httpserve"
	"github.com/servetune/servetune/internal/load/measure"
	"github.com/servetune/servetune/internal/present/report"
	"github.com/servetune/servetune/store"
	"github.com/servetune/servetune/tuner/recommend"
	"github.com/servetune/servetune/tuner/spec"
)

// Server serves the dashboard over DB.
type Server struct {
	DB     *store.Store
	Source string // the database's path, shown on the pages
	Tool   string // "servetune v1.2"
	// Live, when set, is the progress of the running study LiveStudy (the
	// process that serves the page runs it).
	Live      *Live
	LiveStudy string
	// Poll is how often an open page looks for news (default 1 s).
	Poll time.Duration
	// Loopback refuses requests whose Host is not a loopback name or
	// address, so a web page elsewhere cannot reach the dashboard through
	// a DNS name it rebinds to 127.0.0.1. Serve sets it for a loopback
	// address.
	Loopback bool
	// MaxStreams caps the live pages open at once (default 64): one more
	// is refused with 503, so clients cannot exhaust file descriptors or
	// the CPU of the run the page watches. MaxConns caps connections
	// (default 4 × MaxStreams); Serve enforces it.
	MaxStreams, MaxConns int
	// MaxConnsPerAddr caps the connections one remote address holds
	// (default 32; Serve enforces it as it accepts them), so that one
	// client holding connections open cannot take all MaxConns places.
	MaxConnsPerAddr int

	mu      sync.Mutex
	hubs    map[string]*hub // page key ("" index, else study) -> its renderer
	renders atomic.Int64    // renders performed, for tests and figures
	streams atomic.Int64    // open event streams
	conns   atomic.Int64    // open connections (Serve)
	stop    chan struct{}   // closed by Serve's end: hubs stop
	// reportMu serialises full reports; reports keeps each study's last.
	reportMu sync.Mutex
	reports  map[string]cachedReport
	once     sync.Once
}

// Renders returns how many times the server has rendered a page's
// fragments since it started (each serves every open copy of the page).
func (s *Server) Renders() int64 { return s.renders.Load() }

func (s *Server) done() <-chan struct{} {
	s.once.Do(func() { s.stop = make(chan struct{}) })
	return s.stop
}

func (s *Server) maxStreams() int {
	if s.MaxStreams > 0 {
		return s.MaxStreams
	}
	return 64
}

func (s *Server) maxConns() int {
	if s.MaxConns > 0 {
		return s.MaxConns
	}
	return 4 * s.maxStreams()
}

func (s *Server) maxConnsPerAddr() int {
	if s.MaxConnsPerAddr > 0 {
		return s.MaxConnsPerAddr
	}
	return 32
}

func (s *Server) liveVersion(key string) uint64 {
	if s.Live == nil || key == "" || key != s.LiveStudy {
		return 0
	}
	return s.Live.Version()
}

//go:embed templates
var files embed.FS

var pages = template.Must(template.New("").Funcs(template.FuncMap{
	"settings": report.SettingsLine,
	"pct": func(done, total int) int {
		if total <= 0 {
			return 0
		}
		return 100 * done / total
	},
}).ParseFS(files, "templates/*.tmpl"))

// script swaps the fragments the server sends; it is the page's only
// script, allowed by its hash in the Content-Security-Policy.
const script = `(function(){var c=document.getElementById("conn");var es=new EventSource(document.body.dataset.events);` +
	`es.addEventListener("frag",function(e){var f=JSON.parse(e.data);var el=document.getElementById(f.id);if(el){el.innerHTML=f.html;}});` +
	`es.onopen=function(){c.textContent="live";c.className="tag ok";};` +
	`es.onerror=function(){c.textContent="reconnecting";c.className="tag failed";};})();`

var csp = func() string {
	sum := sha256.Sum256([]byte(script))
	return "default-src 'none'; style-src 'unsafe-inline'; img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'; script-src 'sha256-" +
		base64.StdEncoding.EncodeToString(sum[:]) + "'"
}()

// Handler returns the dashboard's routes.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.index)
	mux.HandleFunc("GET /events", s.indexEvents)
	mux.HandleFunc("GET /study/{name}", s.studyPage)
	mux.HandleFunc("GET /study/{name}/events", s.studyEvents)
	mux.HandleFunc("GET /study/{name}/report", s.studyReport)
	return s.guard(mux)
}

// guard sets the headers every response carries and refuses foreign
// hosts on loopback.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n := s.conns.Load(); n > int64(s.maxConns()) {
			w.Header().Set("Connection", "close")
			w.Header().Set("Retry-After", "30")
			http.Error(w, fmt.Sprintf("servetune ui: %d connections are open, the most this dashboard serves; close some pages and reload", s.maxConns()), http.StatusServiceUnavailable)
			return
		}
		if s.Loopback && !httpserve.IsLoopback(r.Host) {
			http.Error(w, "servetune ui: requests must name this machine's loopback address (got Host "+r.Host+")", http.StatusMisdirectedRequest)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

func (s *Server) poll() time.Duration {
	if s.Poll > 0 {
		return s.Poll
	}
	return time.Second
}

// frag is one replaceable part of a page.
type frag struct {
	ID   string        `json:"id"`
	HTML template.HTML `json:"html"`
}

type pageData struct {
	Title, Heading, Events, Tool, Source string
	CSS                                  template.CSS
	Script                               template.JS
	Frags                                []frag
	Back                                 bool
}

func (s *Server) render(w http.ResponseWriter, d pageData) {
	d.CSS, d.Script, d.Tool, d.Source = report.CSS(), template.JS(script), s.Tool, s.Source
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := pages.ExecuteTemplate(w, "page.html.tmpl", d); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	s.page(w, r, "", pageData{Title: "servetune studies", Heading: "Studies", Events: "/events"})
}

func (s *Server) studyPage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	s.page(w, r, name, pageData{Title: "servetune: " + name, Heading: "Study " + name, Events: "/study/" + name + "/events", Back: true})
}

// page serves a page from its hub's current render (rendering it when
// no hub has one).
func (s *Server) page(w http.ResponseWriter, r *http.Request, key string, d pageData) {
	h := s.hub(key)
	defer h.leave()
	fs, _, err := h.current(r.Context())
	if err != nil {
		return // the client left
	}
	for _, f := range fs {
		if f.ID != "error" || f.HTML != "" {
			d.Frags = append(d.Frags, f.frag)
		}
	}
	s.render(w, d)
}

// studyReport serves the full report, rendered again only when the
// study changed (store.Changes), one rendering at a time: a report of a
// large study costs a second of CPU the run being watched may need.
func (s *Server) studyReport(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	s.reportMu.Lock()
	defer s.reportMu.Unlock()
	tok, err := s.DB.Changes(r.Context(), name)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	page, ok := s.reports[name]
	if !ok || page.token != tok {
		st, err := report.Load(r.Context(), s.DB, name)
		if errors.Is(err, report.ErrNoStudy) {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		st.Tool, st.Source = s.Tool, s.Source
		var b bytes.Buffer
		if err := st.WriteHTML(&b); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		page = cachedReport{token: tok, html: b.Bytes()}
		s.renders.Add(1)
		if s.reports == nil {
			s.reports = map[string]cachedReport{}
		}
		s.reports[name] = page
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(page.html)
}

type cachedReport struct {
	token string
	html  []byte
}

func (s *Server) indexEvents(w http.ResponseWriter, r *http.Request) {
	s.stream(w, r, "")
}

func (s *Server) studyEvents(w http.ResponseWriter, r *http.Request) {
	s.stream(w, r, r.PathValue("name"))
}

// streamWriteTimeout drops a live page whose client stopped reading.
const streamWriteTimeout = 20 * time.Second

// keepAliveEvery is how often a quiet stream sends a comment, through
// proxies that close idle streams.
const keepAliveEvery = 15 * time.Second

// stream sends the page's fragments as server-sent events named "frag",
// then each fragment again when its hub renders it differently, until the
// client leaves. Past MaxStreams open streams it refuses with 503.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, key string) {
	if n := s.streams.Add(1); n > int64(s.maxStreams()) {
		s.streams.Add(-1)
		w.Header().Set("Retry-After", "30")
		http.Error(w, fmt.Sprintf("servetune ui: %d live pages are open, the most this dashboard serves; close one and reload", s.maxStreams()), http.StatusServiceUnavailable)
		return
	}
	defer s.streams.Add(-1)
	h := s.hub(key)
	defer h.leave()
	rc := http.NewResponseController(w)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("X-Accel-Buffering", "no")
	fmt.Fprint(w, "retry: 2000\n\n")
	sent := map[string]uint64{}
	keep := time.NewTimer(keepAliveEvery)
	defer keep.Stop()
	first := true
	for {
		fs, changed, err := h.current(r.Context())
		if err != nil {
			return
		}
		wrote := first
		first = false
		for _, f := range fs {
			if sent[f.ID] >= f.ver {
				continue
			}
			sent[f.ID] = f.ver
			if _, err := w.Write(f.event); err != nil {
				return
			}
			wrote = true
		}
		if wrote {
			_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
			if err := rc.Flush(); err != nil {
				return
			}
			keep.Reset(keepAliveEvery)
		}
		select {
		case <-r.Context().Done():
			return
		case <-h.s.done():
			return
		case <-changed:
		case <-keep.C:
			_ = rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
			fmt.Fprint(w, ": keep-alive\n\n")
			if err := rc.Flush(); err != nil {
				return
			}
			keep.Reset(keepAliveEvery)
		}
	}
}

func (s *Server) fragment(id, tmpl string, data any) (frag, error) {
	var b strings.Builder
	if err := pages.ExecuteTemplate(&b, tmpl, data); err != nil {
		return frag{}, err
	}
	return frag{ID: id, HTML: template.HTML(b.String())}, nil
}

func (s *Server) source(key string) source {
	if key == "" {
		return &indexSource{s: s}
	}
	return &studySource{s: s, name: key}
}

type studyRow struct {
	store.Study
	Trials, OK, Failed, Running int
}

// indexSource is the list of studies.
type indexSource struct {
	s    *Server
	rows []studyRow
}

func (x *indexSource) load(ctx context.Context) error {
	studies, err := x.s.DB.ListStudies(ctx)
	if err != nil {
		return err
	}
	var rows []studyRow
	for i := len(studies) - 1; i >= 0; i-- { // newest first
		st := studies[i]
		trials, err := x.s.DB.Trials(ctx, st.ID)
		if err != nil {
			return err
		}
		row := studyRow{Study: st, Trials: len(trials)}
		for _, t := range trials {
			switch t.Status {
			case measure.StatusOK:
				row.OK++
			case measure.StatusFailed:
				row.Failed++
			case measure.StatusRunning:
				row.Running++
			}
		}
		rows = append(rows, row)
	}
	x.rows = rows
	return nil
}

func (x *indexSource) view(time.Time) ([]frag, bool, error) {
	f, err := x.s.fragment("studies", "studies", x.rows)
	return []frag{f}, false, err
}

// studyView is a study's dashboard state.
type studyView struct {
	Name, Status, Source string
	Waiting              bool
	Done, Planned        int
	Elapsed, ETA, Best   string
	Objective            string
	Running              []runningTrial
	LiveNote             bool
	Trials               []trialRow
	Failed               []store.Trial
	SLO                  string
	ReportURL            string
	Recommended          string
	Stopped              string // "stopped at 4 of 30 trials: why", "" unless it stopped early
}

type runningTrial struct {
	Number   int
	Settings string
	GPUs     []int
	For      string
	Level    string
	Done     int
	Total    int
	Levels   int
	HasLive  bool
}

type trialRow struct {
	Number                     int
	Kind, Status, Class, Value string
	Took, Settings             string
	OK, Failed                 bool
}

// studySource is one study as last read from the store, with what is
// costly to derive from it (recommendation, Pareto chart) computed once
// per read.
type studySource struct {
	s           *Server
	name        string
	waiting     bool
	st          store.Study
	spec        *spec.Spec
	trials      []store.Trial
	recommended string
	pareto      template.HTML
}

func (x *studySource) load(ctx context.Context) error {
	st, err := x.s.DB.GetStudy(ctx, x.name)
	if errors.Is(err, store.ErrNotFound) {
		x.waiting = true
		return nil
	}
	if err != nil {
		return err
	}
	study, err := spec.ParseSpec([]byte(st.Spec), x.name+".yaml (stored)")
	if err != nil {
		return fmt.Errorf("stored spec of %s: %w", x.name, err)
	}
	trials, err := x.s.DB.Trials(ctx, st.ID)
	if err != nil {
		return err
	}
	x.waiting, x.st, x.spec, x.trials, x.recommended = false, st, study, trials, ""
	if rec, err := recommend.RecommendStudy(trials, study.Terms(), recommend.PreferObjective); err == nil {
		x.recommended = fmt.Sprintf("trial %d, %s at %s, ranked by %s", rec.Best.Trial, recommend.Format(rec.Best.Metric, rec.Best.Mean), rec.Best.Point.Label, recommend.PreferObjective.For(study.Tuner.Objective).Describe(study.Tuner.Objective))
	}
	x.pareto = (&report.StudyReport{Stored: st, Spec: study, Trials: trials}).ParetoChart()
	return nil
}

func (x *studySource) view(now time.Time) ([]frag, bool, error) {
	s, name := x.s, x.name
	v := studyView{Name: name, Source: s.Source, ReportURL: "/study/" + name + "/report"}
	if x.waiting {
		v.Waiting = true
		f, err := s.fragment("summary", "summary", v)
		return []frag{f, {ID: "running"}, {ID: "pareto"}, {ID: "trials"}, {ID: "failures"}}, false, err
	}
	st, study, trials := x.st, x.spec, x.trials
	v.Status, v.SLO, v.Planned = st.Status, study.SLO.String(), study.Planned()
	obj := study.Tuner.Objective
	v.Objective = obj.String()
	var durations []time.Duration
	var best *float64
	live := map[int]LiveTrial{}
	if s.Live != nil && s.LiveStudy == name {
		for _, t := range s.Live.Running() {
			live[t.Number] = t
		}
		v.LiveNote = true
	}
	for i := len(trials) - 1; i >= 0; i-- {
		t := trials[i]
		row := trialRow{Number: t.Number, Kind: "search", Status: string(t.Status), Class: string(t.Failure), Value: "–",
			Settings: report.SettingsLine(t.Settings), OK: t.Status == measure.StatusOK, Failed: t.Status == measure.StatusFailed}
		if t.Confirms != nil {
			row.Kind = fmt.Sprintf("confirms %d", *t.Confirms)
		}
		if t.Objective != nil && !math.IsNaN(*t.Objective) {
			row.Value = recommend.Format(obj.Metric, *t.Objective)
		}
		switch {
		case t.Status == measure.StatusRunning:
			rt := runningTrial{Number: t.Number, Settings: row.Settings, GPUs: t.GPUs, For: spec.ShortDuration(now.Sub(t.Started))}
			if lt, ok := live[t.Number]; ok {
				rt.Level, rt.Done, rt.Total, rt.Levels, rt.HasLive = lt.Level, lt.Done, lt.Total, lt.Levels, true
			}
			v.Running = append(v.Running, rt)
			row.Took = "running " + rt.For
		case !t.Finished.IsZero():
			d := t.Finished.Sub(t.Started)
			row.Took = spec.ShortDuration(d)
			if t.Status == measure.StatusOK || t.Status == measure.StatusFailed {
				durations = append(durations, d)
				v.Done++
			}
		}
		if t.Status == measure.StatusFailed {
			v.Failed = append(v.Failed, t)
		}
		if t.Confirms == nil && t.Objective != nil && !math.IsNaN(*t.Objective) && (best == nil || (obj.Maximize && *t.Objective > *best) || (!obj.Maximize && *t.Objective < *best)) {
			b := *t.Objective
			best = &b
		}
		v.Trials = append(v.Trials, row)
	}
	sort.Slice(v.Running, func(i, j int) bool { return v.Running[i].Number < v.Running[j].Number })
	if best != nil {
		v.Best = recommend.Format(obj.Metric, *best)
	}
	end := now
	if !st.Finished.IsZero() {
		end = st.Finished
	}
	v.Elapsed = spec.ShortDuration(end.Sub(st.Started))
	running := st.Status == store.StudyRunning
	if running {
		if eta, ok := spec.ETA(durations, v.Planned-v.Done, study.Parallelism()); ok {
			v.ETA = spec.ShortDuration(eta)
		}
	}
	if st.Stop.Stopped() {
		// The study ended before its plan on the sampler's judgement:
		// what it ran is what it planned to, and the stop says why.
		v.Planned, v.Stopped = v.Done, st.Stop.String()
	}
	v.Recommended = x.recommended
	var out []frag
	for _, part := range []string{"summary", "running", "pareto", "trials", "failures"} {
		if part == "pareto" {
			out = append(out, frag{ID: "pareto", HTML: `<h2>Pareto front</h2><figure class="live">` + x.pareto +
				`<figcaption>Every measured point of the search trials; grey ones miss the SLO. Redrawn as trials finish.</figcaption></figure>`})
			continue
		}
		f, err := s.fragment(part, part, v)
		if err != nil {
			return nil, false, err
		}
		out = append(out, f)
	}
	return out, running || len(v.Running) > 0, nil
}

// Serve serves the dashboard on addr until ctx ends. A loopback addr
// turns on the Host check. ready, when not nil, gets the address it
// listens on (addr may ask for port 0).
func (s *Server) Serve(ctx context.Context, addr string, ready func(net.Addr)) error {
	return s.serve(ctx, addr, nil, ready)
}

// serve is Serve on ln, or when ln is nil on a TCP listener bound to addr.
// The tests hand it an in-memory listener, so that the server, its hubs
// and its clients run together in a testing/synctest bubble.
func (s *Server) serve(ctx context.Context, addr string, ln net.Listener, ready func(net.Addr)) error {
	// No ReadTimeout: it would end the event streams (their read side
	// stays open); each stream sets its own write deadline.
	srv := &http.Server{Addr: addr, Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		WriteTimeout: time.Minute, IdleTimeout: time.Minute,
		BaseContext: func(net.Listener) context.Context { return ctx },
		ConnState: func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				s.conns.Add(1)
			case http.StateClosed, http.StateHijacked:
				s.conns.Add(-1)
			}
		}}
	hooks := httpserve.Hooks{
		Listener: func(ln net.Listener) net.Listener {
			if httpserve.IsLoopback(ln.Addr().String()) {
				s.Loopback = true
			}
			// 300 slow connections from one address held 256 places: 18 of
			// 20 page loads got 503 for 40 s.
			return httpserve.PerHostLimit(ln, s.maxConnsPerAddr())
		},
		Ready: ready,
		Stopping: func() {
			s.done()
			close(s.stop) // hubs stop; event streams end with ctx (BaseContext)
		},
	}
	var err error
	if ln == nil {
		err = httpserve.ListenAndServe(ctx, srv, 2*time.Second, hooks)
	} else {
		err = httpserve.ServeListener(ctx, srv, ln, 2*time.Second, hooks)
	}
	if ctx.Err() != nil {
		return nil // a shutdown that outlasts its grace leaves nothing to report
	}
	return err
}
