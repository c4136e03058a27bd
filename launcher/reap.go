package launcher

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
)

// ContainerReaper is the slice of the Docker SDK Reap needs.
type ContainerReaper interface {
	ContainerList(ctx context.Context, opts container.ListOptions) ([]container.Summary, error)
	ContainerRemove(ctx context.Context, id string, opts container.RemoveOptions) error
}

// Reaped is one container Reap removed.
type Reaped struct {
	ID    string
	Name  string
	Study string
	Trial int
	State string // running, exited, created, ...
}

// Reap removes the containers servetune left on a Docker host: those labelled
// servetune.managed=true and, when study is not "", servetune.study=study.
// Running ones are removed too (a crashed study's engines still hold GPUs)
// unless keep returns true for their trial; keep may be nil. It returns what
// it removed, and every removal error joined.
func Reap(ctx context.Context, api ContainerReaper, study string, keep func(trial int) bool) ([]Reaped, error) {
	f := filters.NewArgs(filters.Arg("label", LabelManaged+"=true"))
	if study != "" {
		f.Add("label", LabelStudy+"="+study)
	}
	list, err := api.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("docker: list servetune containers: %w", err)
	}
	var out []Reaped
	var errs []error
	for _, c := range list {
		trial, _ := strconv.Atoi(c.Labels[LabelTrial])
		if keep != nil && keep(trial) {
			continue
		}
		err := api.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) { // gone already: someone else reaped it
			errs = append(errs, fmt.Errorf("docker: remove %s: %w", short(c.ID), err))
			continue
		}
		name := ""
		if len(c.Names) > 0 {
			name = c.Names[0]
		}
		out = append(out, Reaped{ID: c.ID, Name: name, Study: c.Labels[LabelStudy], Trial: trial, State: c.State})
	}
	return out, errors.Join(errs...)
}
