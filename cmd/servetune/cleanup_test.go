package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/testengine"
	"github.com/servetune/servetune/launcher"
	"github.com/servetune/servetune/launcher/docker"
)

func TestCleanupUsage(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no selection", []string{"cleanup"}, "--study NAME or --all"},
		{"both", []string{"cleanup", "--study", "s", "--all"}, "exclude each other"},
		{"bad host", []string{"cleanup", "--all", "--docker-host", "ssh://u:pw@h"}, "passwords"},
		{"spec and study", []string{"cleanup", "--spec", "x.yaml", "--study", "s"}, "--spec excludes"},
		{"spec missing", []string{"cleanup", "--spec", "/nonexistent/x.yaml"}, "read study spec"},
		{"spec without leftovers", []string{"cleanup", "--spec", "../../examples/quickstart.yaml"}, "leaves nothing behind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(context.Background(), tt.args, &out, &errb); code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr %q", code, exitUsage, errb.String())
			}
			if !strings.Contains(errb.String(), tt.want) || strings.Count(errb.String(), "\n") != 1 {
				t.Errorf("stderr %q: want one line mentioning %q", errb.String(), tt.want)
			}
		})
	}
}

// TestCleanupStudy removes a leftover labelled container from the real daemon.
func TestCleanupStudy(t *testing.T) {
	c := testengine.Docker(t)
	requireSimImage(t) // may build the image: before the test's own deadline starts
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	study := fmt.Sprintf("cleanup-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() { _, _ = docker.Reap(context.Background(), c, "", study, nil) })
	labels := map[string]string{launcher.LabelManaged: "true", launcher.LabelStudy: study, launcher.LabelTrial: "4"}
	if _, err := c.ContainerCreate(ctx, &container.Config{Image: engine.SimImage, Labels: labels}, nil, nil, nil, ""); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run(ctx, []string{"cleanup", "--study", study}, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "removed ") || !strings.Contains(out.String(), "trial 4") {
		t.Errorf("stdout %q", out.String())
	}
	left, err := c.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", launcher.LabelStudy+"="+study))})
	if err != nil || len(left) != 0 {
		t.Errorf("left %d containers (%v)", len(left), err)
	}
	out.Reset()
	if code := run(ctx, []string{"cleanup", "--study", study}, &out, &errb); code != exitOK || !strings.Contains(out.String(), "nothing to remove") {
		t.Errorf("second cleanup: exit %d, stdout %q", code, out.String())
	}
}
