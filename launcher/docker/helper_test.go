package docker

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/servetune/servetune/internal/testengine"
	"github.com/servetune/servetune/launcher"
)

func requireDocker(t *testing.T) *client.Client { return testengine.Docker(t) }

func requireSimImage(t *testing.T) { testengine.Image(t) }

func TestMain(m *testing.M) {
	code := m.Run()
	testengine.Cleanup()
	os.Exit(code)
}

// testStudy is a study label no other test or run uses.
func testStudy(t *testing.T) string {
	return fmt.Sprintf("launcher-test-%s-%d-%d", strings.ReplaceAll(t.Name(), "/", "-"), os.Getpid(), time.Now().UnixNano())
}

// studyContainers lists the study's containers the way `docker ps -a
// --filter label=servetune.io/study=S` does.
func studyContainers(t *testing.T, c *client.Client, study string) []container.Summary {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := c.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", launcher.LabelStudy+"="+study))})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// reapAfter removes the study's containers when the test ends, whatever happened.
func reapAfter(t *testing.T, c *client.Client, study string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := Reap(ctx, c, "", study, nil); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
}

func streamCompletion(t *testing.T, base, model string) []string {
	return testengine.StreamCompletion(t, base, model)
}
