package launcher

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/servetune/servetune/internal/serving/engine"
)

// TestParallelEnginesNarrowPorts: twelve engines started at once, their
// ports drawn from three, as parallel trials race for a port the kernel
// called free. Each that is ready answers with its own identity; every
// other one fails to start (its port was taken) and says so. None is ever
// ready on another's answers (two disaggregated trials picked the same
// port, and one measured the other's engine).
func TestParallelEnginesNarrowPorts(t *testing.T) {
	var ports []int
	for range 3 {
		p, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		ports = append(ports, p)
	}
	var mu sync.Mutex
	next := 0
	old := freePort
	freePort = func() (int, error) {
		mu.Lock()
		defer mu.Unlock()
		next++
		return ports[next%len(ports)], nil
	}
	defer func() { freePort = old }()

	p := &Process{Command: helperCommand(t, "ident", "--port", "{port}"), PollInterval: 10 * time.Millisecond, StopTimeout: 2 * time.Second}
	const n = 12
	var wg sync.WaitGroup
	var ready, exited, crossed int
	var started []Instance // stopped once all are done, so each keeps its port meanwhile
	defer func() {
		for _, in := range started {
			in.Stop(context.Background())
		}
	}()
	for range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			in, err := p.Launch(ctx, Spec{Model: "m"})
			if err != nil {
				t.Error(err)
				return
			}
			err = in.Ready(ctx)
			mu.Lock()
			defer mu.Unlock()
			started = append(started, in)
			var ee *ExitError
			switch {
			case errors.As(err, &ee):
				exited++
				return
			case err != nil:
				t.Errorf("neither ready nor exited: %v", err)
				return
			}
			ready++
			resp, herr := http.Get(in.Endpoint() + "/health")
			if herr != nil {
				t.Error(herr)
				return
			}
			resp.Body.Close()
			if got := resp.Header.Get(engine.NonceHeader); got != in.(*processInstance).nonce {
				crossed++
			}
		})
	}
	wg.Wait()
	t.Logf("%d ready, %d failed to start, %d ready on another engine's answers", ready, exited, crossed)
	if crossed > 0 || ready == 0 || ready > len(ports) || ready+exited != n {
		t.Errorf("%d ready (%d on another engine's answers), %d exited of %d on %d ports", ready, crossed, exited, n, len(ports))
	}
}
