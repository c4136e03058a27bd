package docker

import (
	"context"
	"errors"
	"fmt"
	"strconv"

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

// Reap removes the containers servetune left on a Docker host: those labelled
// servetune.managed=true and, when study is not "", servetune.study=study.
// Running ones are removed too (a crashed study's engines still hold GPUs)
// unless keep returns true for them; keep may be nil. It returns what it
// removed, and every removal error joined.
func Reap(ctx context.Context, api ContainerReaper, host, study string, keep func(launcher.Reaped) bool) ([]launcher.Reaped, error) {
	f := filters.NewArgs(filters.Arg("label", LabelManaged+"=true"))
	if study != "" {
		f.Add("label", LabelStudy+"="+study)
	}
	list, err := api.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("docker: list servetune containers: %w", err)
	}
	var out []launcher.Reaped
	var errs []error
	for _, c := range list {
		trial, _ := strconv.Atoi(c.Labels[LabelTrial])
		name := ""
		if len(c.Names) > 0 {
			name = c.Names[0]
		}
		r := launcher.Reaped{Kind: "docker", ID: c.ID, Name: name, Host: host, Study: c.Labels[LabelStudy], Trial: trial,
			Owner: c.Labels[LabelOwner], State: c.State}
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
