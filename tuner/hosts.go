package tuner

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/servetune/servetune/launcher"
)

// hostRouter launches each trial on the Docker host its GPUs belong to
// (launcher.hosts): study GPU number h×HostGPUStride+g is GPU g of host h.
type hostRouter struct {
	hosts []*launcher.Docker
}

var _ launcher.Launcher = (*hostRouter)(nil)

func (r *hostRouter) Launch(ctx context.Context, spec launcher.Spec) (launcher.Instance, error) {
	host := 0
	if len(spec.GPUs) > 0 {
		host = spec.GPUs[0] / HostGPUStride
	}
	if host < 0 || host >= len(r.hosts) {
		return nil, fmt.Errorf("%w: GPU %d belongs to no host of the study", launcher.ErrBadSpec, spec.GPUs[0])
	}
	local := make([]int, 0, len(spec.GPUs))
	for _, g := range spec.GPUs {
		if g/HostGPUStride != host {
			return nil, fmt.Errorf("%w: GPUs %v span two hosts", launcher.ErrBadSpec, spec.GPUs)
		}
		local = append(local, g%HostGPUStride)
	}
	spec.GPUs = local
	return r.hosts[host].Launch(ctx, spec)
}

// ReapStudy removes every container of the study sp from its Docker hosts:
// when the study is not running, all of them are leftovers of a crash or a
// SIGKILL. It returns what it removed; a host it cannot reach is an error.
// Non-docker studies have nothing to reap.
func ReapStudy(ctx context.Context, sp *Spec) ([]launcher.Reaped, error) {
	var (
		seen []string
		out  []launcher.Reaped
		errs []error
	)
	for _, h := range sp.Launcher.DockerHosts() {
		if slices.Contains(seen, h.DockerHost) {
			continue
		}
		seen = append(seen, h.DockerHost)
		c, err := launcher.NewDockerClient(h.DockerHost)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		got, err := launcher.Reap(ctx, c, sp.Name, nil)
		_ = c.Close()
		out = append(out, got...)
		if err != nil {
			errs = append(errs, fmt.Errorf("docker host %s: %w", orLocal(h.DockerHost), err))
		}
	}
	return out, errors.Join(errs...)
}

func orLocal(host string) string {
	if host == "" {
		return "(DOCKER_HOST or the local socket)"
	}
	return host
}
