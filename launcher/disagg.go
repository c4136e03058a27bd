package launcher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/servetune/servetune/internal/serving/engine"
)

// Disaggregated runs a disaggregated configuration (engine.Settings.Parts)
// as one trial: each prefill and decode engine through Base, on its own
// share of the trial's GPUs, and the router in front of them as a local
// process (it needs no GPU, and it reaches the parts wherever the
// benchmark would). The trial talks to the router. An aggregated
// configuration is Base's alone. Every part carries the trial's label,
// so a reaper finds each of them after a killed run.
type Disaggregated struct {
	Base   Launcher
	Router Router
	KV     engine.KVTransfer
	// KVLink, when set, tells a simulated engine the link the KV cache
	// crosses (engine.EnvSimKVLink; a real engine ignores the variable).
	KVLink string
	// Host is the address the router binds and the trial uses; default
	// 127.0.0.1.
	Host        string
	StopTimeout time.Duration // the router's SIGTERM→SIGKILL grace; default DefaultStopTimeout
}

// Router is the command of a disaggregated deployment's router: vLLM's
// proxy, SGLang's router, `servetune sim router`.
type Router struct {
	// Command is an argv template: {host}, {port} (the router's),
	// {model} and {servetune} (this program) in every element; an element
	// that is exactly {prefill_hosts}, {prefill_ports}, {prefill_urls},
	// {decode_hosts}, {decode_ports} or {decode_urls} becomes one element
	// per engine of that role.
	Command []string
	// EachPrefill and EachDecode are appended once per engine of their
	// role, with {url}, {host} and {port} the engine's (SGLang's router:
	// --prefill {url} for each prefill engine).
	EachPrefill, EachDecode []string
	HealthPath              string // default /health
}

// Capabilities are Base's, with a reaper that also finds a killed run's
// routers (local processes, whatever kind Base is).
func (d *Disaggregated) Capabilities() Capabilities {
	c := d.Base.Capabilities()
	base := c.Reap
	c.Reap = func(ctx context.Context, study string, keep func(Reaped) bool) ([]Reaped, error) {
		var out []Reaped
		var errs []error
		if base != nil {
			r, err := base(ctx, study, keep)
			out, errs = append(out, r...), append(errs, err)
		}
		r, err := ReapLocal(ctx, "router", study, keep, OrDefaultDuration(d.StopTimeout, DefaultStopTimeout))
		return append(out, r...), errors.Join(append(errs, err)...)
	}
	return c
}

// Launch starts every engine part of spec's configuration (the router
// starts in Ready, once the parts serve and their endpoints are known).
// When one part cannot start, those already started are stopped.
func (d *Disaggregated) Launch(ctx context.Context, spec Spec) (Instance, error) {
	parts := spec.Settings.Parts()
	if parts == nil {
		return d.Base.Launch(ctx, spec)
	}
	if len(d.Router.Command) == 0 {
		return nil, fmt.Errorf("%w: a disaggregated trial needs a router command", ErrBadSpec)
	}
	need := spec.Settings.GPUs()
	if len(spec.GPUs) > 0 && len(spec.GPUs) != need {
		return nil, fmt.Errorf("%w: the parts need %d GPUs, the trial has %d", ErrBadSpec, need, len(spec.GPUs))
	}
	// The router's port is chosen as it starts (startRouter), not now:
	// the parts' start-up is a long window for another process to take it.
	port := spec.Port
	in := &composite{d: d, spec: spec, host: OrDefault(d.Host, "127.0.0.1"), port: port, exited: make(chan struct{})}
	next := 0
	for _, p := range parts {
		ps := spec
		ps.Settings = p.Settings
		ps.Port = 0
		ps.Part = p.Name()
		ps.Extra = append(engine.RoleArgs(spec.Engine, p.Role, d.KV), spec.Extra...)
		ps.Env = append([]string(nil), spec.Env...)
		if d.KVLink != "" {
			ps.Env = append(ps.Env, engine.EnvSimKVLink+"="+d.KVLink)
		}
		if len(spec.GPUs) > 0 {
			ps.GPUs = spec.GPUs[next : next+p.GPUs()]
			next += p.GPUs()
		} else {
			ps.GPUs = nil
		}
		pi, err := d.Base.Launch(ctx, ps)
		if err != nil {
			in.stopAll(ctx)
			return nil, &PartError{Part: p.Name(), Err: err}
		}
		in.parts = append(in.parts, part{name: p.Name(), role: p.Role, inst: pi})
	}
	for _, p := range in.parts {
		if _, ok := p.inst.(queued); ok {
			return &queuedComposite{in}, nil
		}
	}
	return in, nil
}

// queued is implemented by instances a batch scheduler queues (a Slurm
// job; trial/trial.go reads it).
type queued interface {
	Queue() (pending time.Duration, started time.Time, reason string)
}

// queuedComposite is a trial whose parts a scheduler queues, each its own
// job: the trial has started once its last part has.
type queuedComposite struct{ *composite }

// Queue is the longest wait of the parts and the latest start; while a
// part still waits, started is zero and the reason names each waiting
// part with the scheduler's reason.
func (c *queuedComposite) Queue() (time.Duration, time.Time, string) {
	var pending time.Duration
	var started time.Time
	var waiting []string
	for _, p := range c.parts {
		q, ok := p.inst.(queued)
		if !ok {
			continue
		}
		d, s, why := q.Queue()
		pending = max(pending, d)
		if s.IsZero() {
			waiting = append(waiting, p.name+": "+why)
		} else if s.After(started) {
			started = s
		}
	}
	if len(waiting) > 0 {
		return pending, time.Time{}, strings.Join(waiting, "; ")
	}
	return pending, started, ""
}

// PartError is the failure of one part of a trial of several engines: it
// names the part and keeps that part's own output.
type PartError struct {
	Part string // e.g. "prefill 0", "decode 1", "router"
	Logs string
	Err  error
}

func (e *PartError) Error() string { return e.Part + ": " + e.Err.Error() }

// Unwrap gives the part's own error (an ExitError when it exited).
func (e *PartError) Unwrap() error { return e.Err }

// PartExiter is implemented by instances of several engines: which part
// ended first and its output, once Exiter's Exited is closed.
type PartExiter interface {
	ExitedPart() (name, logs string)
}

type part struct {
	name string
	role engine.Role
	inst Instance
}

// composite is a running disaggregated trial.
type composite struct {
	d          *Disaggregated
	spec       Spec
	host       string
	port       int
	parts      []part
	router     Instance // set by Ready
	routerName string

	mu       sync.Mutex
	exited   chan struct{}
	exitPart *part // the first part that ended

	stopOnce sync.Once
	stopErr  error
}

var (
	_ Instance   = (*composite)(nil)
	_ Exiter     = (*composite)(nil)
	_ PartExiter = (*composite)(nil)
)

func (c *composite) Endpoint() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return "http://" + HostPort(c.host, c.port)
}

// Logs is each part's tail under its name, the router's last.
func (c *composite) Logs() string {
	var b strings.Builder
	for _, p := range c.all() {
		fmt.Fprintf(&b, "== %s ==\n%s\n", p.name, strings.TrimRight(p.inst.Logs(), "\n"))
	}
	return b.String()
}

func (c *composite) all() []part {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := append([]part(nil), c.parts...)
	if c.router != nil {
		out = append(out, part{name: "router", inst: c.router})
	}
	return out
}

// Ready waits until every engine part serves, then starts the router and
// waits for it. The first part that fails ends the wait, its error a
// PartError: the other parts' waits then end in cancellation, which may
// reach the channel before it, so a PartError is returned over them.
func (c *composite) Ready(ctx context.Context) error {
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(c.parts))
	for _, p := range c.parts {
		go func() {
			err := p.inst.Ready(rctx)
			if err != nil && rctx.Err() == nil {
				err = &PartError{Part: p.name, Logs: p.inst.Logs(), Err: err}
				cancel()
			}
			errs <- err
		}()
	}
	var failed, other error // the first part's failure; the first other error (ctx's end)
	for range c.parts {
		err := <-errs
		var pe *PartError
		switch {
		case err == nil:
		case errors.As(err, &pe):
			if failed == nil {
				failed = err
			}
		case other == nil:
			other = err
		}
	}
	if failed != nil {
		return failed
	}
	if other != nil {
		return other
	}
	if err := c.startRouter(ctx); err != nil {
		return err
	}
	c.watch()
	return nil
}

// startRouter launches the router as a local process in front of the
// ready parts and waits for its health.
func (c *composite) startRouter(ctx context.Context) error {
	argv, err := c.routerArgv()
	if err != nil {
		return &PartError{Part: "router", Err: err}
	}
	if c.port == 0 {
		port, err := freePort()
		if err != nil {
			return &PartError{Part: "router", Err: err}
		}
		c.mu.Lock()
		c.port = port
		c.mu.Unlock()
	}
	p := Process{Command: argv, Host: c.host, HealthPath: OrDefault(c.d.Router.HealthPath, "/health"), StopTimeout: c.d.StopTimeout}
	rs := Spec{Model: c.spec.Model, Study: c.spec.Study, Trial: c.spec.Trial, Owner: c.spec.Owner, Port: c.port}
	ri, err := p.Launch(ctx, rs)
	if err != nil {
		return &PartError{Part: "router", Err: err}
	}
	c.mu.Lock()
	c.router = ri
	c.mu.Unlock()
	if err := ri.Ready(ctx); err != nil {
		return &PartError{Part: "router", Logs: ri.Logs(), Err: err}
	}
	return nil
}

// routerArgv fills the router's template with the parts' endpoints
// ({host}, {port} and {model} are Process's to fill).
func (c *composite) routerArgv() ([]string, error) {
	urls := map[engine.Role][]string{}
	for _, p := range c.parts {
		urls[p.role] = append(urls[p.role], p.inst.Endpoint())
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the servetune binary: %w", err)
	}
	return engine.RouterArgv(c.d.Router.Command, c.d.Router.EachPrefill, c.d.Router.EachDecode, urls, self)
}

// watch closes exited when the first part or the router ends.
func (c *composite) watch() {
	for _, p := range c.all() {
		x, ok := p.inst.(Exiter)
		if !ok {
			continue
		}
		go func() {
			select {
			case <-x.Exited():
			case <-c.exited:
				return
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.exitPart == nil {
				c.exitPart = &p
				close(c.exited)
			}
		}()
	}
}

// Exited is closed when any part or the router ended after Ready.
func (c *composite) Exited() <-chan struct{} { return c.exited }

// Exit is the first part's that ended.
func (c *composite) Exit() engine.Exit {
	c.mu.Lock()
	p := c.exitPart
	c.mu.Unlock()
	if p == nil {
		return engine.Exit{Code: -1}
	}
	if x, ok := p.inst.(Exiter); ok {
		return x.Exit()
	}
	return engine.Exit{Code: -1}
}

// ExitedPart names the part that ended first and gives its output.
func (c *composite) ExitedPart() (string, string) {
	c.mu.Lock()
	p := c.exitPart
	c.mu.Unlock()
	if p == nil {
		return "", ""
	}
	return p.name, p.inst.Logs()
}

// Stop stops the router, then every part at once; safe to call again.
func (c *composite) Stop(ctx context.Context) error {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		r := c.router
		c.mu.Unlock()
		var errs []error
		if r != nil {
			if err := r.Stop(ctx); err != nil {
				errs = append(errs, fmt.Errorf("router: %w", err))
			}
		}
		errs = append(errs, c.stopAll(ctx))
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

// stopAll stops every started engine part at once, with a context of its
// own when ctx has ended (a cancelled trial still stops what it started).
func (c *composite) stopAll(ctx context.Context) error {
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), OrDefaultDuration(c.d.StopTimeout, DefaultStopTimeout)+5*time.Second)
		defer cancel()
	}
	errs := make([]error, len(c.parts))
	var wg sync.WaitGroup
	for i, p := range c.parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.inst.Stop(ctx); err != nil {
				errs[i] = fmt.Errorf("%s: %w", p.name, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
