package ui

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"math"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/servetune/servetune/measure"
	"github.com/servetune/servetune/report"
	"github.com/servetune/servetune/store"
	"github.com/servetune/servetune/tuner"
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

	mu     sync.Mutex
	charts map[string]cachedChart // study -> its Pareto chart at a fingerprint
}

type cachedChart struct {
	key string
	svg template.HTML
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
		if s.Loopback && !loopbackHost(r.Host) {
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

func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
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
	frags, err := s.indexFrags(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.render(w, pageData{Title: "servetune studies", Heading: "Studies", Events: "/events", Frags: frags})
}

func (s *Server) studyPage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	frags, err := s.studyFrags(r.Context(), name)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.render(w, pageData{Title: "servetune: " + name, Heading: "Study " + name, Events: "/study/" + name + "/events", Frags: frags, Back: true})
}

func (s *Server) studyReport(w http.ResponseWriter, r *http.Request) {
	st, err := report.Load(r.Context(), s.DB, r.PathValue("name"))
	if errors.Is(err, report.ErrNoStudy) {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	st.Tool, st.Source = s.Tool, s.Source
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := st.WriteHTML(w); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

func (s *Server) indexEvents(w http.ResponseWriter, r *http.Request) {
	s.stream(w, r, s.indexFrags)
}

func (s *Server) studyEvents(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	s.stream(w, r, func(ctx context.Context) ([]frag, error) { return s.studyFrags(ctx, name) })
}

// stream sends, every Poll, the fragments that changed since the last
// send, as server-sent events named "frag", until the client leaves.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, frags func(context.Context) ([]frag, error)) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	fmt.Fprint(w, "retry: 2000\n\n")
	sent := map[string]template.HTML{}
	tick := time.NewTicker(s.poll())
	defer tick.Stop()
	quiet := 0
	for {
		fs, err := frags(r.Context())
		if err != nil {
			if r.Context().Err() != nil {
				return
			}
			fs = []frag{{ID: "error", HTML: template.HTML(`<p class="card norec">` + template.HTMLEscapeString(err.Error()) + `</p>`)}}
		} else if _, had := sent["error"]; had {
			fs = append(fs, frag{ID: "error"})
		}
		wrote := false
		for _, f := range fs {
			if old, ok := sent[f.ID]; ok && old == f.HTML {
				continue
			}
			sent[f.ID] = f.HTML
			data, _ := json.Marshal(f)
			fmt.Fprintf(w, "event: frag\ndata: %s\n\n", data)
			wrote = true
		}
		if quiet++; !wrote && quiet >= 15 {
			fmt.Fprint(w, ": keep-alive\n\n") // through proxies that close idle streams
			wrote = true
		}
		if wrote {
			quiet = 0
			if err := rc.Flush(); err != nil {
				return
			}
		}
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
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

type studyRow struct {
	store.Study
	Trials, OK, Failed, Running int
}

func (s *Server) indexFrags(ctx context.Context) ([]frag, error) {
	studies, err := s.DB.ListStudies(ctx)
	if err != nil {
		return nil, err
	}
	var rows []studyRow
	for i := len(studies) - 1; i >= 0; i-- { // newest first
		st := studies[i]
		trials, err := s.DB.Trials(ctx, st.ID)
		if err != nil {
			return nil, err
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
	f, err := s.fragment("studies", "studies", rows)
	return []frag{f}, err
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

func (s *Server) studyFrags(ctx context.Context, name string) ([]frag, error) {
	v := studyView{Name: name, Source: s.Source, ReportURL: "/study/" + name + "/report"}
	st, err := s.DB.GetStudy(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		v.Waiting = true
		f, err := s.fragment("summary", "summary", v)
		return []frag{f, {ID: "running"}, {ID: "pareto"}, {ID: "trials"}, {ID: "failures"}}, err
	}
	if err != nil {
		return nil, err
	}
	sp, err := tuner.ParseSpec([]byte(st.Spec), name+".yaml (stored)")
	if err != nil {
		return nil, fmt.Errorf("stored spec of %s: %w", name, err)
	}
	trials, err := s.DB.Trials(ctx, st.ID)
	if err != nil {
		return nil, err
	}
	v.Status, v.SLO, v.Planned = st.Status, sp.SLO.String(), sp.Planned()
	obj := sp.Tuner.Objective
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
	now := time.Now()
	for i := len(trials) - 1; i >= 0; i-- {
		t := trials[i]
		row := trialRow{Number: t.Number, Kind: "search", Status: string(t.Status), Class: string(t.Failure), Value: "–",
			Settings: report.SettingsLine(t.Settings), OK: t.Status == measure.StatusOK, Failed: t.Status == measure.StatusFailed}
		if t.Confirms != nil {
			row.Kind = fmt.Sprintf("confirms %d", *t.Confirms)
		}
		if t.Objective != nil && !math.IsNaN(*t.Objective) {
			row.Value = tuner.Format(obj.Metric, *t.Objective)
		}
		switch {
		case t.Status == measure.StatusRunning:
			rt := runningTrial{Number: t.Number, Settings: row.Settings, GPUs: t.GPUs, For: tuner.ShortDuration(now.Sub(t.Started))}
			if lt, ok := live[t.Number]; ok {
				rt.Level, rt.Done, rt.Total, rt.Levels, rt.HasLive = lt.Level, lt.Done, lt.Total, lt.Levels, true
			}
			v.Running = append(v.Running, rt)
			row.Took = "running " + rt.For
		case !t.Finished.IsZero():
			d := t.Finished.Sub(t.Started)
			row.Took = tuner.ShortDuration(d)
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
		v.Best = tuner.Format(obj.Metric, *best)
	}
	end := now
	if !st.Finished.IsZero() {
		end = st.Finished
	}
	v.Elapsed = tuner.ShortDuration(end.Sub(st.Started))
	if st.Status == store.StudyRunning {
		if eta, ok := tuner.ETA(durations, v.Planned-v.Done, (&tuner.Study{Spec: sp}).Parallelism()); ok {
			v.ETA = tuner.ShortDuration(eta)
		}
	}
	if rec, err := tuner.RecommendStudy(trials, sp, tuner.PreferThroughput); err == nil {
		v.Recommended = fmt.Sprintf("trial %d, %s output at %s", rec.Best.Trial, tuner.Format(rec.Best.Metric, rec.Best.Mean), rec.Best.Point.Label)
	}
	var out []frag
	for _, part := range []string{"summary", "running", "pareto", "trials", "failures"} {
		if part == "pareto" {
			out = append(out, frag{ID: "pareto", HTML: `<h2>Pareto front</h2><figure class="live">` + s.pareto(st, sp, trials) +
				`<figcaption>Every measured point of the search trials; grey ones miss the SLO. Redrawn as trials finish.</figcaption></figure>`})
			continue
		}
		f, err := s.fragment(part, part, v)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// pareto is the study's Pareto chart, drawn again only when a trial
// finished since the last drawing.
func (s *Server) pareto(st store.Study, sp *tuner.Spec, trials []store.Trial) template.HTML {
	var key strings.Builder
	for _, t := range trials {
		fmt.Fprintf(&key, "%d:%s:%d;", t.Number, t.Status, len(t.LoadPoints))
	}
	s.mu.Lock()
	c, ok := s.charts[st.Name]
	s.mu.Unlock()
	if ok && c.key == key.String() {
		return c.svg
	}
	svg := (&report.Study{Stored: st, Spec: sp, Trials: trials}).ParetoChart()
	s.mu.Lock()
	if s.charts == nil {
		s.charts = map[string]cachedChart{}
	}
	s.charts[st.Name] = cachedChart{key: key.String(), svg: svg}
	s.mu.Unlock()
	return svg
}

// Serve serves the dashboard on addr until ctx ends. A loopback addr
// turns on the Host check. ready, when not nil, gets the address it
// listens on (addr may ask for port 0).
func (s *Server) Serve(ctx context.Context, addr string, ready func(net.Addr)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); ok && ta.IP.IsLoopback() {
		s.Loopback = true
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	if ready != nil {
		ready(ln.Addr())
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx) // event streams end with ctx (BaseContext)
	<-done
	return nil
}

// IsLoopback reports whether addr ("host:port") names a loopback host
// (an empty host listens everywhere: not loopback).
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	return loopbackHost(host)
}
