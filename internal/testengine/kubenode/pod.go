package main

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// pod runs one Pod's first container on the Docker Engine.
type pod struct {
	n         *node
	ns, name  string
	uid       types.UID
	spec      corev1.PodSpec
	ctx       context.Context
	cancel    context.CancelFunc
	done      chan struct{}
	stopGrace time.Duration

	mu       sync.Mutex
	id, prev string // the container's id, the one before a restart
	status   corev1.ContainerStatus
	ip       string
	ready    bool
	started  metav1.Time
}

func newPod(n *node, p *corev1.Pod) *pod {
	ctx, cancel := context.WithCancel(context.Background())
	c := p.Spec.Containers[0]
	return &pod{n: n, ns: p.Namespace, name: p.Name, uid: p.UID, spec: p.Spec, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		started: metav1.Now(),
		status:  corev1.ContainerStatus{Name: c.Name, Image: c.Image, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
}

func (p *pod) containerID(previous bool) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if previous {
		return p.prev
	}
	return p.id
}

// stop stops the container (SIGTERM, SIGKILL after grace) and removes it.
func (p *pod) stop(grace time.Duration) {
	p.mu.Lock()
	if p.stopGrace == 0 {
		p.stopGrace = grace
	}
	p.mu.Unlock()
	p.cancel()
	<-p.done
}

func (p *pod) run(parent context.Context) {
	defer close(p.done)
	go func() {
		select {
		case <-parent.Done():
			p.cancel()
		case <-p.ctx.Done():
		}
	}()
	c := p.spec.Containers[0]
	backoff := 10 * time.Second
	for restarts := 0; ; restarts++ {
		if !p.pull(c) {
			break
		}
		code, oom, err := p.runOnce(c, restarts)
		if err != nil {
			p.set(func(s *corev1.ContainerStatus) {
				s.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CreateContainerError", Message: err.Error()}}
			})
		}
		if p.ctx.Err() != nil {
			break
		}
		if err == nil {
			reason := "Error"
			switch {
			case oom:
				reason = "OOMKilled"
			case code == 0:
				reason = "Completed"
			}
			p.mu.Lock()
			p.ready = false
			p.mu.Unlock()
			term := &corev1.ContainerStateTerminated{ExitCode: int32(code), Reason: reason, FinishedAt: metav1.Now()}
			if p.spec.RestartPolicy == corev1.RestartPolicyNever || p.spec.RestartPolicy == corev1.RestartPolicyOnFailure && code == 0 {
				p.set(func(s *corev1.ContainerStatus) { s.State = corev1.ContainerState{Terminated: term} })
				<-p.ctx.Done()
				break
			}
			p.set(func(s *corev1.ContainerStatus) {
				s.LastTerminationState = corev1.ContainerState{Terminated: term}
				s.RestartCount = int32(restarts + 1)
				s.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
					Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s(%s)", backoff, c.Name, p.name, p.ns, p.uid)}}
			})
		}
		select {
		case <-p.ctx.Done():
		case <-time.After(backoff):
		}
		if p.ctx.Err() != nil {
			break
		}
		backoff = min(2*backoff, 5*time.Minute)
	}
	p.mu.Lock()
	ids := []string{p.id, p.prev}
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), p.stopGrace+30*time.Second)
	defer cancel()
	secs := int(p.stopGrace.Seconds())
	for _, id := range ids {
		if id != "" {
			_ = p.n.docker.ContainerStop(ctx, id, container.StopOptions{Timeout: &secs})
			_ = p.n.docker.ContainerRemove(ctx, id, container.RemoveOptions{Force: true})
		}
	}
}

// pull waits for the image: the node never pulls, so a missing image is
// ErrImagePull, then ImagePullBackOff, looked at again every 10 s. It
// returns false when the pod ends first.
func (p *pod) pull(c corev1.Container) bool {
	for i := 0; ; i++ {
		_, err := p.n.docker.ImageInspect(p.ctx, c.Image)
		if err == nil {
			return true
		}
		if p.ctx.Err() != nil {
			return false
		}
		reason, msg := "ErrImagePull", fmt.Sprintf("failed to pull and unpack image %q: %v (the servetune test node never pulls: build or load the image into the local Docker Engine)", c.Image, err)
		if !cerrdefs.IsNotFound(err) {
			msg = fmt.Sprintf("failed to inspect image %q: %v", c.Image, err)
		}
		if i%2 == 1 {
			reason, msg = "ImagePullBackOff", fmt.Sprintf("Back-off pulling image %q: %s", c.Image, msg)
		}
		p.set(func(s *corev1.ContainerStatus) {
			s.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
		})
		select {
		case <-p.ctx.Done():
			return false
		case <-time.After(10 * time.Second):
		}
	}
}

// runOnce creates and starts the container, probes it, and waits for it to
// end (or the pod to), returning its exit code and whether it was OOM-killed.
func (p *pod) runOnce(c corev1.Container, restarts int) (int, bool, error) {
	var env []string
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env = append(env, e.Name+"="+e.Value)
		}
	}
	hc := &container.HostConfig{}
	if m, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		hc.Memory = m.Value()
		hc.MemorySwap = hc.Memory
	}
	cfg := &container.Config{Image: c.Image, Entrypoint: c.Command, Cmd: c.Args, Env: env,
		Labels: map[string]string{labelUID: string(p.uid), "io.servetune.kubenode.pod": p.ns + "/" + p.name}}
	name := fmt.Sprintf("k8s_%s_%s_%s_%.8s_%d", c.Name, p.name, p.ns, p.uid, restarts)
	created, err := p.n.docker.ContainerCreate(p.ctx, cfg, hc, nil, nil, name)
	if err != nil {
		return 0, false, err
	}
	p.mu.Lock()
	if p.prev != "" {
		_ = p.n.docker.ContainerRemove(context.Background(), p.prev, container.RemoveOptions{Force: true})
	}
	p.prev, p.id = p.id, created.ID
	p.mu.Unlock()
	if err := p.n.docker.ContainerStart(p.ctx, created.ID, container.StartOptions{}); err != nil {
		return 0, false, err
	}
	ins, err := p.n.docker.ContainerInspect(p.ctx, created.ID)
	if err != nil {
		return 0, false, err
	}
	p.mu.Lock()
	if ins.NetworkSettings != nil {
		p.ip = ins.NetworkSettings.IPAddress
	}
	p.mu.Unlock()
	p.set(func(s *corev1.ContainerStatus) {
		s.ContainerID = "docker://" + created.ID
		s.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}
	})
	pctx, stopProbe := context.WithCancel(p.ctx)
	defer stopProbe()
	go p.probe(pctx, c)
	okc, errc := p.n.docker.ContainerWait(p.ctx, created.ID, container.WaitConditionNotRunning)
	select {
	case r := <-okc:
		stopProbe()
		ins, err := p.n.docker.ContainerInspect(context.Background(), created.ID)
		oom := err == nil && ins.State != nil && ins.State.OOMKilled
		return int(r.StatusCode), oom, nil
	case err := <-errc:
		return 0, false, err
	}
}

// probe runs the readiness probe (HTTP GET only) and sets Ready.
func (p *pod) probe(ctx context.Context, c corev1.Container) {
	pr := c.ReadinessProbe
	if pr == nil || pr.HTTPGet == nil {
		p.setReady(true)
		return
	}
	port := pr.HTTPGet.Port.IntValue()
	if port == 0 {
		for _, cp := range c.Ports {
			if cp.Name == pr.HTTPGet.Port.String() {
				port = int(cp.ContainerPort)
			}
		}
	}
	period := time.Duration(max(pr.PeriodSeconds, 1)) * time.Second
	period = min(period, 2*time.Second) // a test node: answer quickly
	fails := 0
	hc := &http.Client{Timeout: time.Duration(max(pr.TimeoutSeconds, 1)) * time.Second}
	for {
		p.mu.Lock()
		ip := p.ip
		p.mu.Unlock()
		resp, err := hc.Get("http://" + net.JoinHostPort(ip, strconv.Itoa(port)) + pr.HTTPGet.Path)
		ok := err == nil && resp.StatusCode >= 200 && resp.StatusCode < 400
		if resp != nil {
			resp.Body.Close()
		}
		if ok {
			fails = 0
			p.setReady(true)
		} else if fails++; fails >= int(max(pr.FailureThreshold, 1)) {
			p.setReady(false)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(period):
		}
	}
}

func (p *pod) setReady(ready bool) {
	p.mu.Lock()
	changed := p.ready != ready
	p.ready = ready
	p.mu.Unlock()
	if changed {
		p.set(func(s *corev1.ContainerStatus) {})
	}
}

// set changes the container's status and writes the pod's.
func (p *pod) set(f func(*corev1.ContainerStatus)) {
	p.mu.Lock()
	f(&p.status)
	p.status.Ready = p.ready && p.status.State.Running != nil
	p.status.Started = ptr.To(p.status.State.Running != nil)
	cs := p.status
	ip := p.ip
	st := p.started
	p.mu.Unlock()
	phase := corev1.PodPending
	if cs.ContainerID != "" {
		phase = corev1.PodRunning
	}
	if t := cs.State.Terminated; t != nil {
		phase = corev1.PodFailed
		if t.ExitCode == 0 {
			phase = corev1.PodSucceeded
		}
	}
	cond := func(t corev1.PodConditionType, ok bool) corev1.PodCondition {
		s := corev1.ConditionFalse
		if ok {
			s = corev1.ConditionTrue
		}
		return corev1.PodCondition{Type: t, Status: s, LastTransitionTime: metav1.Now()}
	}
	pods := p.n.kube.CoreV1().Pods(p.ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := pods.Get(context.Background(), p.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != p.uid {
			return nil
		}
		cur.Status.Phase = phase
		cur.Status.HostIP = p.n.cfg.address
		cur.Status.StartTime = &st
		if ip != "" {
			cur.Status.PodIP = ip
			cur.Status.PodIPs = []corev1.PodIP{{IP: ip}}
		}
		cur.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
		cur.Status.Conditions = []corev1.PodCondition{cond(corev1.PodScheduled, true), cond(corev1.PodInitialized, true),
			cond(corev1.ContainersReady, cs.Ready), cond(corev1.PodReady, cs.Ready)}
		_, err = pods.UpdateStatus(context.Background(), cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		log.Printf("kubenode: status of %s/%s: %v", p.ns, p.name, err)
	}
}
