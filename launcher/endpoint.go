package launcher

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/servetune/servetune/internal/yamlpos"
	"gopkg.in/yaml.v3"
)

// Endpoint "launches" an engine that is already running at URL: nothing is
// started and Stop leaves it alone. Spec.Port and Spec.Env are ignored.
type Endpoint struct {
	URL          string        // base URL, e.g. http://10.0.0.5:8000
	HealthPath   string        // default /health
	PollInterval time.Duration // default DefaultPollInterval
}

var _ Launcher = (*Endpoint)(nil)

// Capabilities: the server's settings are its owner's (FixedSettings);
// Preflight asks it which models it serves.
func (e *Endpoint) Capabilities() Capabilities {
	return Capabilities{Preflight: e.Preflight, FixedSettings: true}
}

func init() {
	Register(Kind{
		Name: "endpoint",
		Doc:  "a server that is already running: nothing is launched, so the space must fix every value (the server's own)",
		Keys: []Key{{Name: "base_url", Doc: "the server's base URL, http(s)://host:port", Required: true}},
		Decode: func(d *yamlpos.Decoder, keys map[string]*yaml.Node, c Common) Launcher {
			x := keys["base_url"]
			u := d.Str(x, "launcher.base_url")
			if !d.Failed() && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
				d.Fail(x, "launcher.base_url", "%q: want an http:// or https:// URL", u)
			}
			return &Endpoint{URL: u}
		},
	})
}

// Launch checks the URL and returns an instance pointing at it.
func (e *Endpoint) Launch(ctx context.Context, spec Spec) (Instance, error) {
	u, err := url.Parse(e.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: endpoint URL %q is not an http(s) base URL", ErrBadSpec, e.URL)
	}
	return &endpointInstance{
		base:   strings.TrimRight(e.URL, "/"),
		health: OrDefault(e.HealthPath, "/health"),
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
	return WaitHealthy(ctx, in.base+in.health, in.poll, nil, nil)
}

// Stop does nothing: the endpoint belongs to someone else.
func (in *endpointInstance) Stop(context.Context) error { return nil }

// Preflight asks the server which models it serves, when it answers: a
// study of another model would fail every request with a 404.
func (e *Endpoint) Preflight(ctx context.Context, spec Spec) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(e.URL, "/")+"/v1/models", nil)
	if err != nil {
		return fmt.Errorf("%w: endpoint URL %q: %v", ErrBadSpec, e.URL, err)
	}
	resp, err := healthClient.Do(req)
	if err != nil {
		return nil // not up yet: the trial waits for it and says so
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&list) != nil || len(list.Data) == 0 {
		return nil // no model list to check against
	}
	var ids []string
	for _, m := range list.Data {
		if m.ID == spec.Model {
			return nil
		}
		ids = append(ids, m.ID)
	}
	return fmt.Errorf("the server at %s serves %s, not %q (the study's model)", e.URL, strings.Join(ids, ", "), spec.Model)
}
