package launcher

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Endpoint "launches" an engine that is already running at URL: nothing is
// started and Stop leaves it alone. Spec.Port and Spec.Env are ignored.
type Endpoint struct {
	URL          string        // base URL, e.g. http://10.0.0.5:8000
	HealthPath   string        // default /health
	PollInterval time.Duration // default DefaultPollInterval
}

var _ Launcher = (*Endpoint)(nil)

// Launch checks the URL and returns an instance pointing at it.
func (e *Endpoint) Launch(ctx context.Context, spec Spec) (Instance, error) {
	u, err := url.Parse(e.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: endpoint URL %q is not an http(s) base URL", ErrBadSpec, e.URL)
	}
	return &endpointInstance{
		base:   strings.TrimRight(e.URL, "/"),
		health: orDefault(e.HealthPath, "/health"),
		poll:   e.PollInterval,
	}, nil
}

type endpointInstance struct {
	base, health string
	poll         time.Duration
}

func (in *endpointInstance) Endpoint() string { return in.base }
func (in *endpointInstance) Logs() string     { return "" }

func (in *endpointInstance) Ready(ctx context.Context) error {
	return waitHealthy(ctx, in.base+in.health, in.poll, nil, nil)
}

// Stop does nothing: the endpoint belongs to someone else.
func (in *endpointInstance) Stop(context.Context) error { return nil }
