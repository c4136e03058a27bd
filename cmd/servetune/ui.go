package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/spf13/cobra"

	"github.com/servetune/servetune/internal/httpserve"
	"github.com/servetune/servetune/internal/present/ui"
	"github.com/servetune/servetune/store"
)

// defaultUIAddr is loopback: the dashboard has no authentication.
const defaultUIAddr = "127.0.0.1:8080"

func newUICmd() *cobra.Command {
	var dbPath, addr string
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve the live dashboard of a study database in the browser (read-only)",
		Long: `Serve a read-only dashboard of the studies in a database: the studies, and for
each its trials as they start and finish, best so far, ETA, the Pareto chart
and failures, updated live (server-sent events) while another process runs
the study. It listens on loopback unless --addr says otherwise; it has no
authentication, and never starts or stops anything. Stop it with Ctrl-C.`,
		Example: `  servetune ui --db .servetune/servetune.db
  servetune tune examples/quickstart.yaml --ui 127.0.0.1:8080   # the run serves its own, with load-level progress`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			return withDB(ctx, dbPath, func(db *store.Store) error {
				srv := &ui.Server{DB: db, Source: dbPath, Tool: "servetune " + version}
				return serveUI(ctx, srv, addr, "/", cmd.OutOrStdout(), cmd.ErrOrStderr())
			})
		},
	}
	addDBFlag(cmd, &dbPath)
	cmd.Flags().StringVar(&addr, "addr", defaultUIAddr, "address to listen on (host:port; a non-loopback host exposes the dashboard to the network)")
	return cmd
}

// serveUI serves srv on addr until ctx ends, printing its URL (path
// appended) once it listens. A non-loopback address gets a warning.
func serveUI(ctx context.Context, srv *ui.Server, addr, path string, stdout, stderr io.Writer) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return usageErrorf("--addr %q: want host:port, e.g. %s", addr, defaultUIAddr)
	}
	if !httpserve.IsLoopback(addr) {
		fmt.Fprintf(stderr, "warning: the dashboard on %s is reachable from the network without authentication (read-only)\n", addr)
	}
	err := srv.Serve(ctx, addr, func(a net.Addr) {
		fmt.Fprintf(stdout, "dashboard: http://%s%s\n", a, path)
	})
	if err != nil {
		return usageErrorf("--addr %s: %v", addr, err)
	}
	return nil
}

// startTuneUI serves the dashboard of a running study in the background;
// the returned function stops it.
func startTuneUI(ctx context.Context, srv *ui.Server, addr, study string, stderr io.Writer) (stop func(), err error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, usageErrorf("--ui %q: want host:port, e.g. %s", addr, defaultUIAddr)
	}
	ready := make(chan error, 1)
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := srv.Serve(sctx, addr, func(a net.Addr) {
			if !httpserve.IsLoopback(addr) {
				fmt.Fprintf(stderr, "warning: the dashboard on %s is reachable from the network without authentication (read-only)\n", addr)
			}
			fmt.Fprintf(stderr, "dashboard: http://%s/study/%s\n", a, study)
			ready <- nil
		})
		if err != nil {
			ready <- err
		}
	}()
	select {
	case err := <-ready:
		if err != nil {
			cancel()
			<-done
			return nil, usageErrorf("--ui %s: %v", addr, err)
		}
	case <-time.After(5 * time.Second):
		cancel()
		return nil, failedError(fmt.Errorf("--ui %s: the dashboard did not start", addr))
	}
	return func() { cancel(); <-done }, nil
}
