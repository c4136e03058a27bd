package docker

import (
	"context"
	"errors"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"

	"github.com/servetune/servetune/launcher"
)

// ContainerReaper is the slice of the Docker SDK Reap needs.
type ContainerReaper interface {
	ContainerList(ctx context.Context, opts container.ListOptions) ([]container.Summary, error)
	ContainerRemove(ctx context.Context, id string, opts container.RemoveOptions) error
}

// Reap removes the containers servetune left on a Docker host: those whose
// labels launcher.ParseLabels reads (an older servetune's too) and, when
// study is not "", that name study.
// Running ones are removed too (a crashed study's engines still hold GPUs)
// unless keep returns true for them; keep may be nil. It returns what it
// removed, and every removal error joined.
func Reap(ctx context.Context, api ContainerReaper, host, study string, keep func(launcher.Reaped) bool) ([]launcher.Reaped, error) {
	var list []container.Summary
	seen := map[string]bool{}
	for _, managed := range []string{launcher.LabelManaged, launcher.OldLabelManaged} {
		l, err := api.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", managed+"=true"))})
		if err != nil {
			return nil, fmt.Errorf("docker: list servetune containers: %w", err)
		}
		for _, c := range l {
			if !seen[c.ID] {
				seen[c.ID] = true
				list = append(list, c)
			}
		}
	}
	var out []launcher.Reaped
	var errs []error
	for _, c := range list {
		l, ok := launcher.ParseLabels(c.Labels)
		if !ok || study != "" && l.Study != study {
			continue
		}
		name := ""
		if len(c.Names) > 0 {
			name = c.Names[0]
		}
		r := launcher.Reaped{Kind: "docker", ID: c.ID, Name: name, Host: host, Study: l.Study, Trial: l.Trial,
			Owner: l.Owner, State: c.State}
		if keep != nil && keep(r) {
			continue
		}
		err := api.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) { // gone already: someone else reaped it
			errs = append(errs, fmt.Errorf("docker: remove %s: %w", short(c.ID), err))
			continue
		}
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}
