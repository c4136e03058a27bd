// Command kubenode is the stand-in Kubernetes node of the local test
// cluster that scripts/kube-up.sh starts: it registers a Node with GPUs
// (nvidia.com/gpu) as an extended resource, runs each Pod the scheduler
// binds to it as one container on the local Docker Engine (its first
// container only: the kubernetes launcher's pods have one), and reports
// what a kubelet reports: the pod's IP (the container's on Docker's
// bridge, reachable from this machine), the container's state (Running;
// Terminated with OOMKilled or Error and the exit code; waiting in
// CrashLoopBackOff between restarts; ErrImagePull and ImagePullBackOff for
// an image the engine lacks, since it never pulls), the Ready condition
// from the container's HTTP readiness probe, and the logs
// (/containerLogs, which the API server proxies for `kubectl logs`). A
// deleted pod's container is removed and the pod released.
//
// It is not a kubelet: no volumes, no port-forward or exec, no kube-proxy
// (ClusterIPs do not route); see README, Kubernetes. It exists because a
// real kubelet needs a container runtime and cgroup access this sandbox
// lacks; the launcher under test (launcher/kubernetes) is the code that
// runs against a real cluster.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "the API server's kubeconfig")
	flag.StringVar(&cfg.name, "name", "servetune-node", "the Node's name")
	flag.IntVar(&cfg.gpus, "gpus", 4, "nvidia.com/gpu the node advertises")
	flag.StringVar(&cfg.cpus, "cpus", "32", "CPUs the node advertises")
	flag.StringVar(&cfg.memory, "memory", "256Gi", "memory the node advertises")
	flag.StringVar(&cfg.address, "address", "127.0.0.1", "the node's address the API server reaches its log endpoint at")
	flag.IntVar(&cfg.port, "port", 10250, "the log endpoint's port (HTTPS, a self-signed certificate)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "kubenode:", err)
		os.Exit(1)
	}
	log.Print("kubenode: stopped")
}
