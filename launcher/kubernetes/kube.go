// Package kubernetes is the kubernetes launcher kind: each trial is a
// Deployment of one replica (the trial's GPUs requested as nvidia.com/gpu,
// the engine's image and arguments and the readiness probe of the
// manifests `recommend` writes, internal/serving/kube) and a Service, in
// the namespace the spec names, labelled with the study, trial and run.
//
// The benchmark reaches the engine through the Service's DNS name when
// servetune runs in the cluster, through a port-forward to the pod from
// outside (access: auto), or at the pod's IP on a flat network (access:
// pod-ip, what the stand-in node of scripts/kube-up.sh supports: it serves
// no port-forward). A trial's end is read from the pod: a container
// OOMKilled, exited (CrashLoopBackOff), an image that cannot be pulled, or
// a pod the scheduler cannot place for pending_timeout (its reason). Stop
// deletes the trial's objects and waits for its pods to go; Reap deletes
// what a killed run left, found by label.
package kubernetes

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/utils/ptr"

	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/serving/kube"
	"github.com/servetune/servetune/launcher"
	"github.com/servetune/servetune/launcher/simenv"
)

// The labels of a trial's objects. Label values are at most 63 characters
// of [A-Za-z0-9._-], so the study and the run are hashed there; the
// annotations hold launcher.Label's pairs in full, which Reap reads.
const (
	LabelStudyID  = launcher.LabelPrefix + "study-id" // hash of the study name
	LabelRunID    = launcher.LabelPrefix + "run-id"   // hash of the owner (the run)
	LabelInstance = launcher.LabelPrefix + "instance" // the trial's objects' name: the selector
)

// Access says how the benchmark reaches a trial's engine.
const (
	AccessAuto        = "auto"         // service in the cluster, else port-forward
	AccessService     = "service"      // the Service's DNS name (servetune runs in the cluster)
	AccessPortForward = "port-forward" // a port-forward to the pod through the API server
	AccessPodIP       = "pod-ip"       // the pod's IP (a flat network; the stand-in test node)
)

// DefaultPendingTimeout is how long a pod may stay unschedulable before
// the trial fails with the scheduler's reason.
const DefaultPendingTimeout = 5 * time.Minute

// Kube launches each trial as a Deployment and a Service.
type Kube struct {
	Namespace  string // default "default"
	Kubeconfig string // "" = KUBECONFIG, ~/.kube/config, or the in-cluster config
	Context    string // "" = the kubeconfig's current context
	Image      string // "" = the engine's image (engine.DefaultImage)
	PullPolicy corev1.PullPolicy
	Access     string
	// PassEnv names variables of this process handed to the engine: their
	// values land in the Deployment's spec, as `kubectl set env` would.
	PassEnv        []string
	Env            []string // fixed KEY=VALUE (the simulated engine's facts)
	PendingTimeout time.Duration
	StopTimeout    time.Duration
	Poll           time.Duration

	gpu   string  // hardware.gpu, for the simulated engine's preflight
	scale float64 // the simulated engine's time scale
	gpus  []int

	mu     sync.Mutex
	client kubernetes.Interface
	rest   *rest.Config
}

var _ launcher.Launcher = (*Kube)(nil)

// Capabilities: reaping by label, the simulated engine's time scale, a
// preflight that reaches the namespace. GPU placement is the scheduler's.
func (k *Kube) Capabilities() launcher.Capabilities {
	return launcher.Capabilities{GPUs: k.gpus, Reap: k.Reap, TimeScale: simenv.TimeScale(k.scale), Preflight: k.Preflight}
}

// Client is the API client of the spec's kubeconfig and context (the
// in-cluster config inside a pod), made on first use.
func (k *Kube) Client() (kubernetes.Interface, *rest.Config, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.client != nil {
		return k.client, k.rest, nil
	}
	cfg, err := RESTConfig(k.Kubeconfig, k.Context)
	if err != nil {
		return nil, nil, err
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	k.client, k.rest = c, cfg
	return c, cfg, nil
}

// RESTConfig loads a kubeconfig (path "" = KUBECONFIG or ~/.kube/config)
// with a context ("" = its current one), or the in-cluster config when
// there is no kubeconfig and servetune runs in a pod.
func RESTConfig(path, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if path != "" {
		rules.ExplicitPath = path
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes: %w", err)
	}
	cfg.QPS, cfg.Burst = 20, 40
	return cfg, nil
}

func (k *Kube) namespace() string {
	if k.Namespace == "" {
		return "default"
	}
	return k.Namespace
}

func (k *Kube) sim() bool { return engine.IsSimImage(k.Image) }

// Preflight checks the namespace answers (the credentials, the context)
// and, for the simulated engine's image, that it can model the study.
func (k *Kube) Preflight(ctx context.Context, spec launcher.Spec) error {
	c, _, err := k.Client()
	if err != nil {
		return err
	}
	if _, err := c.CoreV1().Namespaces().Get(ctx, k.namespace(), metav1.GetOptions{}); err != nil {
		return fmt.Errorf("kubernetes: namespace %s: %w", k.namespace(), err)
	}
	if k.sim() {
		return simenv.Preflight(spec.Model, "", k.gpu)
	}
	return nil
}

// Hash is the label value of a study or run name: its SHA-256's first 16
// hex digits.
func Hash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}

var dnsUnsafe = regexp.MustCompile(`[^a-z0-9-]+`)

// objectName is a DNS-1035 label, readable in `kubectl get` and unique per
// launch.
func objectName(spec launcher.Spec) string {
	study := strings.Trim(dnsUnsafe.ReplaceAllString(strings.ToLower(spec.Study), "-"), "-")
	if len(study) > 30 {
		study = strings.Trim(study[:30], "-")
	}
	if study == "" {
		study = "adhoc"
	}
	return fmt.Sprintf("st-%s-t%d-%s", study, spec.Trial, strconv.FormatInt(time.Now().UnixNano()%(1<<40), 36))
}

// Objects renders the trial's Deployment and Service. It touches no
// cluster, so it is tested on its own.
func (k *Kube) Objects(spec launcher.Spec) (*appsv1.Deployment, *corev1.Service, error) {
	eng := spec.Engine
	if eng == "" {
		eng = engine.VLLM
	}
	name := objectName(spec)
	d, svc, err := kube.Deployment(kube.Serve{Name: name, Engine: eng, Model: spec.Model, Settings: spec.Settings,
		Extra: spec.Extra, GPUs: max(len(spec.GPUs), 1), Image: k.Image, Study: spec.Study, Trial: spec.Trial})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", launcher.ErrBadSpec, err)
	}
	lbl := map[string]string{launcher.LabelManaged: "true", LabelStudyID: Hash(spec.Study), LabelRunID: Hash(spec.Owner),
		launcher.LabelTrial: strconv.Itoa(spec.Trial), LabelInstance: name}
	ann := launcher.LabelOf(spec).Labels()
	for _, m := range []*metav1.ObjectMeta{&d.ObjectMeta, &d.Spec.Template.ObjectMeta, &svc.ObjectMeta} {
		m.Namespace = k.namespace()
		m.Labels = merge(m.Labels, lbl)
		m.Annotations = merge(m.Annotations, ann)
	}
	d.Spec.Template.ObjectMeta.Namespace = ""
	sel := map[string]string{LabelInstance: name}
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: sel}
	svc.Spec.Selector = sel
	pod := &d.Spec.Template.Spec
	pod.AutomountServiceAccountToken = ptr.To(false) // the engine does not talk to the API server
	// A trial that fails is not restarted for long: Ready reads the first exit.
	c := &pod.Containers[0]
	c.ImagePullPolicy = k.PullPolicy
	args, err := spec.Args()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", launcher.ErrBadSpec, err)
	}
	env := append(append([]string(nil), k.Env...), spec.Env...)
	if k.sim() {
		// The simulated engine's image takes vLLM's arguments for either
		// engine (its entry point), and its facts from the environment.
		c.Command, c.Args = nil, engine.ContainerArgs(eng, spec.Model, args, engine.ContainerPort)
		env = append(env, engine.SimEnv("", max(len(spec.GPUs), 1), 0, "")...)
		env = append(env, engine.EnvSimEngine+"="+string(eng))
	}
	env = append(env, launcher.PassEnv(k.PassEnv, os.LookupEnv)...)
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
	}
	return d, svc, nil
}

func merge(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// Launch creates the trial's Deployment and Service. It does not wait for
// the engine: call Ready.
func (k *Kube) Launch(ctx context.Context, spec launcher.Spec) (launcher.Instance, error) {
	d, svc, err := k.Objects(spec)
	if err != nil {
		return nil, err
	}
	c, cfg, err := k.Client()
	if err != nil {
		return nil, err
	}
	ns := k.namespace()
	if _, err := c.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("kubernetes: create deployment %s/%s: %w", ns, d.Name, err)
	}
	in := &instance{k: k, c: c, cfg: cfg, ns: ns, name: d.Name, created: time.Now(), exited: make(chan struct{}), done: make(chan struct{})}
	if _, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		_ = in.Stop(ctx)
		return nil, fmt.Errorf("kubernetes: create service %s/%s: %w", ns, svc.Name, err)
	}
	return in, nil
}

type instance struct {
	k       *Kube
	c       kubernetes.Interface
	cfg     *rest.Config
	ns      string
	name    string
	created time.Time

	mu        sync.Mutex
	endpoint  string
	pod       string    // the pod's name, once there is one
	restarts  int32     // the container's restarts
	started   time.Time // when the container first ran
	pending   string    // the scheduler's reason while it cannot place the pod
	exit      engine.Exit
	exited    chan struct{}
	exitOnce  sync.Once
	done      chan struct{} // closed by Stop: the watch ends
	watching  bool
	forward   chan struct{}     // closes the port-forward
	kept      launcher.KeptLogs // kept at Stop: the pod's logs go with it
	stopOnce  sync.Once
	stopErr   error
	closeDone sync.Once
}

var (
	_ launcher.Instance = (*instance)(nil)
	_ launcher.Exiter   = (*instance)(nil)
)

func (in *instance) Endpoint() string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.endpoint
}

func (in *instance) Exited() <-chan struct{} { return in.exited }

func (in *instance) Exit() engine.Exit {
	select {
	case <-in.exited:
		in.mu.Lock()
		defer in.mu.Unlock()
		return in.exit
	default:
		return engine.Exit{Code: -1}
	}
}

// Queue says how long the pod waited for the scheduler, when its container
// first ran (zero before) and the scheduler's reason while it waits.
func (in *instance) Queue() (time.Duration, time.Time, string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.started.IsZero() {
		return time.Since(in.created), time.Time{}, in.pending
	}
	return in.started.Sub(in.created), in.started, ""
}

func (in *instance) end(e engine.Exit) {
	in.exitOnce.Do(func() {
		in.mu.Lock()
		in.exit = e
		in.mu.Unlock()
		close(in.exited)
	})
}

// ErrImagePull is wrapped by Ready's error when the pod's image cannot be
// pulled (no such image, no access).
var ErrImagePull = errors.New("image cannot be pulled")

// pullReasons are the container waiting reasons that end a trial at once.
var pullReasons = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true,
	"ErrImageNeverPull": true, "CreateContainerConfigError": true, "CreateContainerError": true}

// look reads the trial's pod once: nil while it is on its way, an
// ExitError when its container ended or it cannot be placed, an error
// wrapping ErrImagePull, or ready (with the pod) once it serves.
func (in *instance) look(ctx context.Context) (*corev1.Pod, bool, error) {
	pods, err := in.c.CoreV1().Pods(in.ns).List(ctx, metav1.ListOptions{LabelSelector: labels.Set{LabelInstance: in.name}.String()})
	if err != nil {
		return nil, false, nil // the API server may be busy: look again
	}
	var p *corev1.Pod
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil {
			p = &pods.Items[i]
		}
	}
	if p == nil {
		return nil, false, nil
	}
	in.mu.Lock()
	in.pod = p.Name
	in.mu.Unlock()
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
			in.mu.Lock()
			in.pending = "unschedulable: " + cond.Message
			in.mu.Unlock()
			timeout := in.k.PendingTimeout
			if timeout <= 0 {
				timeout = DefaultPendingTimeout
			}
			if wait := time.Since(in.created); wait > timeout {
				e := engine.Exit{Code: -1, Scheduler: fmt.Sprintf("kubernetes: pod %s unschedulable for %s: %s", p.Name, wait.Round(time.Second), cond.Message)}
				in.end(e)
				return p, false, &launcher.ExitError{Exit: e}
			}
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		in.mu.Lock()
		in.restarts = cs.RestartCount
		if in.started.IsZero() && (cs.State.Running != nil || cs.State.Terminated != nil || cs.RestartCount > 0) {
			in.started, in.pending = time.Now(), ""
		}
		in.mu.Unlock()
		if w := cs.State.Waiting; w != nil && pullReasons[w.Reason] {
			return p, false, fmt.Errorf("%w: pod %s: %s: %s", ErrImagePull, p.Name, w.Reason, w.Message)
		}
		t := cs.State.Terminated
		if t == nil {
			t = cs.LastTerminationState.Terminated
		}
		if t != nil {
			e := engine.Exit{Code: int(t.ExitCode), OOMKilled: t.Reason == "OOMKilled"}
			in.end(e)
			return p, false, &launcher.ExitError{Exit: e}
		}
	}
	if p.Status.Phase == corev1.PodFailed {
		e := engine.Exit{Code: -1, Scheduler: fmt.Sprintf("kubernetes: pod %s failed: %s %s", p.Name, p.Status.Reason, p.Status.Message)}
		in.end(e)
		return p, false, &launcher.ExitError{Exit: e}
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue && p.Status.PodIP != "" {
			return p, true, nil
		}
	}
	return p, false, nil
}

func (in *instance) poll() time.Duration {
	if in.k.Poll > 0 {
		return in.k.Poll
	}
	return 500 * time.Millisecond
}

// Ready waits for the pod's readiness probe, reaches the engine by the
// launcher's access, and checks /health there.
func (in *instance) Ready(ctx context.Context) error {
	t := time.NewTicker(in.poll())
	defer t.Stop()
	for {
		p, ok, err := in.look(ctx)
		if err != nil {
			return err
		}
		if ok {
			if err := in.reach(ctx, p); err != nil {
				return err
			}
			in.mu.Lock()
			if !in.watching {
				in.watching = true
				go in.watch()
			}
			in.mu.Unlock()
			return launcher.WaitHealthy(ctx, in.Endpoint()+engine.HealthPath, in.poll(), in.exited, func() error {
				return &launcher.ExitError{Exit: in.Exit()}
			})
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// watch ends the instance when the engine's container ends or restarts
// while it serves, or its pod is gone.
func (in *instance) watch() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-in.done:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, _, err := in.look(ctx)
		cancel()
		var exit *launcher.ExitError
		if errors.As(err, &exit) {
			return
		}
	}
}

// reach sets the endpoint by the launcher's access.
func (in *instance) reach(ctx context.Context, p *corev1.Pod) error {
	access := in.k.Access
	if access == "" || access == AccessAuto {
		access = AccessPortForward
		if os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
			access = AccessService
		}
	}
	port := strconv.Itoa(engine.ContainerPort)
	var ep string
	switch access {
	case AccessPodIP:
		ep = "http://" + launcherHostPort(p.Status.PodIP, port)
	case AccessService:
		ep = fmt.Sprintf("http://%s.%s.svc:%s", in.name, in.ns, port)
	case AccessPortForward:
		local, err := in.portForward(ctx, p.Name)
		if err != nil {
			return err
		}
		ep = "http://" + launcherHostPort("127.0.0.1", strconv.Itoa(local))
	default:
		return fmt.Errorf("%w: kubernetes access %q", launcher.ErrBadSpec, access)
	}
	in.mu.Lock()
	in.endpoint = ep
	in.mu.Unlock()
	return nil
}

func launcherHostPort(host, port string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + port
	}
	return host + ":" + port
}

// portForward forwards a free local port to the pod's engine port through
// the API server (SPDY, as `kubectl port-forward`), until Stop.
func (in *instance) portForward(ctx context.Context, pod string) (int, error) {
	rt, upgrader, err := spdy.RoundTripperFor(in.cfg)
	if err != nil {
		return 0, err
	}
	u, err := url.Parse(in.cfg.Host)
	if err != nil {
		return 0, err
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + fmt.Sprintf("/api/v1/namespaces/%s/pods/%s/portforward", in.ns, pod)
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, u)
	stop, ready := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(engine.ContainerPort)}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		return 0, err
	}
	errc := make(chan error, 1)
	go func() { errc <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-errc:
		return 0, fmt.Errorf("kubernetes: port-forward to %s: %w", pod, err)
	case <-ctx.Done():
		close(stop)
		return 0, ctx.Err()
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) == 0 {
		close(stop)
		return 0, fmt.Errorf("kubernetes: port-forward to %s: no local port: %v", pod, err)
	}
	in.mu.Lock()
	in.forward = stop
	in.mu.Unlock()
	return int(ports[0].Local), nil
}

// Logs returns the tail of the engine container's log (the ended one's
// after a restart) or, without one, the pod's events.
func (in *instance) Logs() string { return in.kept.Logs(in.fetchLogs) }

func (in *instance) fetchLogs(ctx context.Context) string {
	in.mu.Lock()
	pod, restarts := in.pod, in.restarts
	in.mu.Unlock()
	if pod == "" {
		return in.events(ctx)
	}
	get := func(previous bool) (string, error) {
		b, err := in.c.CoreV1().Pods(in.ns).GetLogs(pod, &corev1.PodLogOptions{TailLines: ptr.To[int64](1000), Previous: previous,
			LimitBytes: ptr.To[int64](int64(launcher.DefaultLogBytes))}).DoRaw(ctx)
		return string(b), err
	}
	if restarts > 0 {
		if s, err := get(true); err == nil && s != "" {
			return s
		}
	}
	s, err := get(false)
	if err != nil || s == "" {
		if ev := in.events(ctx); ev != "" {
			return ev
		}
		if err != nil {
			return fmt.Sprintf("(no logs: %v)", err)
		}
	}
	return s
}

// events is the pod's events, one a line: the scheduler's and the node's
// word when the engine wrote nothing.
func (in *instance) events(ctx context.Context) string {
	in.mu.Lock()
	pod := in.pod
	in.mu.Unlock()
	if pod == "" {
		return ""
	}
	ev, err := in.c.CoreV1().Events(in.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, e := range ev.Items {
		fmt.Fprintf(&b, "%s %s: %s\n", e.Type, e.Reason, e.Message)
	}
	return b.String()
}

// Stop keeps the log tail, deletes the Deployment and the Service, and
// waits for the trial's pods to go. It goes on after ctx is cancelled
// (Ctrl-C is when cleanup matters), bounded by the stop timeout plus 30 s.
func (in *instance) Stop(ctx context.Context) error {
	in.stopOnce.Do(func() { in.stopErr = in.stop(ctx) })
	return in.stopErr
}

func (in *instance) stop(ctx context.Context) error {
	timeout := in.k.StopTimeout
	if timeout <= 0 {
		timeout = launcher.DefaultStopTimeout
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout+30*time.Second)
	defer cancel()
	in.closeDone.Do(func() { close(in.done) })
	in.mu.Lock()
	if in.forward != nil {
		close(in.forward)
		in.forward = nil
	}
	in.mu.Unlock()
	in.kept.Keep(in.fetchLogs(ctx))
	err := deleteInstance(ctx, in.c, in.ns, in.name, int64(timeout.Seconds()))
	in.end(engine.Exit{Code: -1})
	return err
}

// deleteInstance deletes a trial's Deployment, Service, ReplicaSets and
// pods (grace seconds each) and waits until no pod of it is left.
func deleteInstance(ctx context.Context, c kubernetes.Interface, ns, name string, grace int64) error {
	sel := labels.Set{LabelInstance: name}.String()
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &bg, GracePeriodSeconds: &grace}
	var errs []error
	keep := func(err error) {
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	keep(c.AppsV1().Deployments(ns).Delete(ctx, name, opts))
	keep(c.CoreV1().Services(ns).Delete(ctx, name, opts))
	keep(c.AppsV1().ReplicaSets(ns).DeleteCollection(ctx, opts, metav1.ListOptions{LabelSelector: sel}))
	keep(c.CoreV1().Pods(ns).DeleteCollection(ctx, opts, metav1.ListOptions{LabelSelector: sel}))
	for {
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err == nil && len(pods.Items) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("kubernetes: pods of %s/%s still there: %w", ns, name, ctx.Err()))
			return errors.Join(errs...)
		case <-time.After(500 * time.Millisecond):
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("kubernetes: delete %s/%s: %w", ns, name, errors.Join(errs...))
	}
	return nil
}
