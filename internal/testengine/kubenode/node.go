package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

type config struct {
	kubeconfig, name, cpus, memory, address string
	gpus, port                              int
}

// labelUID marks the node's containers (never servetune.io/ labels: the
// docker kind's reaper must not take them for its own).
const labelUID = "io.servetune.kubenode.uid"

type node struct {
	cfg    config
	kube   kubernetes.Interface
	docker *client.Client

	mu   sync.Mutex
	pods map[types.UID]*pod
}

func run(ctx context.Context, cfg config) error {
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.kubeconfig)
	if err != nil {
		return err
	}
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	dc, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return err
	}
	n := &node{cfg: cfg, kube: kc, docker: dc, pods: map[types.UID]*pod{}}
	n.removeStale(ctx)
	if err := n.register(ctx); err != nil {
		return fmt.Errorf("register node %s: %w", cfg.name, err)
	}
	go n.heartbeat(ctx)
	go func() {
		if err := n.serveLogs(ctx); err != nil {
			log.Printf("kubenode: log endpoint: %v", err)
		}
	}()
	f := informers.NewSharedInformerFactoryWithOptions(kc, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", cfg.name).String()
	}))
	inf := f.Core().V1().Pods().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { n.sync(ctx, o) },
		UpdateFunc: func(_, o any) { n.sync(ctx, o) },
		DeleteFunc: func(o any) {
			if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			if p, ok := o.(*corev1.Pod); ok {
				n.forget(p.UID)
			}
		},
	})
	f.Start(ctx.Done())
	log.Printf("kubenode: node %s up (%d nvidia.com/gpu), logs on %s:%d", cfg.name, cfg.gpus, cfg.address, cfg.port)
	<-ctx.Done()
	n.mu.Lock()
	for _, p := range n.pods {
		p.cancel()
	}
	n.mu.Unlock()
	return nil
}

// removeStale removes the containers an earlier run of the node left: the
// pods still bound to it are started again.
func (n *node) removeStale(ctx context.Context) {
	l, err := n.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", labelUID))})
	if err != nil {
		return
	}
	for _, c := range l {
		_ = n.docker.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true})
	}
}

func (n *node) nodeStatus() corev1.NodeStatus {
	now := metav1.Now()
	res := corev1.ResourceList{
		corev1.ResourceCPU:                    resource.MustParse(n.cfg.cpus),
		corev1.ResourceMemory:                 resource.MustParse(n.cfg.memory),
		corev1.ResourcePods:                   resource.MustParse("110"),
		corev1.ResourceName("nvidia.com/gpu"): *resource.NewQuantity(int64(n.cfg.gpus), resource.DecimalSI),
	}
	return corev1.NodeStatus{
		Capacity:    res,
		Allocatable: res,
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			Message: "servetune kubenode: pods run on the local Docker Engine", LastHeartbeatTime: now, LastTransitionTime: now}},
		Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.cfg.address}, {Type: corev1.NodeHostName, Address: n.cfg.name}},
		DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(n.cfg.port)}},
		NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.37.2-servetune-kubenode", OperatingSystem: "linux", Architecture: "amd64",
			ContainerRuntimeVersion: "docker://local"},
	}
}

func (n *node) register(ctx context.Context) error {
	nodes := n.kube.CoreV1().Nodes()
	want := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.cfg.name, Labels: map[string]string{
		"kubernetes.io/hostname": n.cfg.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "type": "servetune-kubenode"}}}
	got, err := nodes.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		got, err = nodes.Get(ctx, n.cfg.name, metav1.GetOptions{})
	}
	if err != nil {
		return err
	}
	got.Status = n.nodeStatus()
	_, err = nodes.UpdateStatus(ctx, got, metav1.UpdateOptions{})
	return err
}

// heartbeat keeps the node Ready: its status and its lease, every 10 s.
func (n *node) heartbeat(ctx context.Context) {
	leases := n.kube.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		if err := n.register(ctx); err != nil && ctx.Err() == nil {
			log.Printf("kubenode: node status: %v", err)
		}
		now := metav1.NewMicroTime(time.Now())
		l, err := leases.Get(ctx, n.cfg.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = leases.Create(ctx, &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: n.cfg.name},
				Spec: coordv1.LeaseSpec{HolderIdentity: ptr.To(n.cfg.name), LeaseDurationSeconds: ptr.To[int32](40), RenewTime: &now}}, metav1.CreateOptions{})
		} else if err == nil {
			l.Spec.RenewTime = &now
			_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		}
		if err != nil && ctx.Err() == nil {
			log.Printf("kubenode: lease: %v", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sync starts a new pod's runner and ends a deleted one's.
func (n *node) sync(ctx context.Context, o any) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	n.mu.Lock()
	r := n.pods[p.UID]
	if r == nil && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		r = newPod(n, p)
		n.pods[p.UID] = r
		go r.run(ctx)
	}
	n.mu.Unlock()
	if p.DeletionTimestamp != nil {
		go n.release(ctx, p, r)
	}
}

// release stops a deleted pod's container and removes the pod from the
// API server, as a kubelet does once its containers are gone.
func (n *node) release(ctx context.Context, p *corev1.Pod, r *pod) {
	if r != nil {
		grace := 30 * time.Second
		if p.DeletionGracePeriodSeconds != nil {
			grace = time.Duration(*p.DeletionGracePeriodSeconds) * time.Second
		}
		r.stop(grace)
	}
	err := n.kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0),
		Preconditions: &metav1.Preconditions{UID: &p.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		log.Printf("kubenode: release pod %s/%s: %v", p.Namespace, p.Name, err)
	}
}

func (n *node) forget(uid types.UID) {
	n.mu.Lock()
	r := n.pods[uid]
	delete(n.pods, uid)
	n.mu.Unlock()
	if r != nil {
		r.stop(0)
	}
}

func (n *node) lookup(ns, name string) *pod {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range n.pods {
		if p.ns == ns && p.name == name {
			return p
		}
	}
	return nil
}

// serveLogs serves the kubelet's /containerLogs/{ns}/{pod}/{container}
// (tailLines, previous, limitBytes) over HTTPS for the API server's pods/log.
func (n *node) serveLogs(ctx context.Context) error {
	cert, err := selfSigned(n.cfg.name, n.cfg.address)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/containerLogs/", func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/containerLogs/"), "/")
		if len(parts) < 2 {
			http.NotFound(w, r)
			return
		}
		p := n.lookup(parts[0], parts[1])
		if p == nil {
			http.Error(w, "pod not found on node "+n.cfg.name, http.StatusNotFound)
			return
		}
		id := p.containerID(r.URL.Query().Get("previous") == "true")
		if id == "" {
			http.Error(w, "container has not started", http.StatusBadRequest)
			return
		}
		tail := "all"
		if t := r.URL.Query().Get("tailLines"); t != "" {
			tail = t
		}
		rc, err := n.docker.ContainerLogs(r.Context(), id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: tail})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer rc.Close()
		w.Header().Set("Content-Type", "text/plain")
		var out http.ResponseWriter = w
		if lb, err := strconv.Atoi(r.URL.Query().Get("limitBytes")); err == nil && lb > 0 {
			out = &limitWriter{ResponseWriter: w, left: lb}
		}
		_, _ = stdcopy.StdCopy(out, out, rc)
	})
	srv := &http.Server{Addr: net.JoinHostPort("", strconv.Itoa(n.cfg.port)), Handler: mux,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}, ReadHeaderTimeout: 10 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.ListenAndServeTLS("", ""); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

type limitWriter struct {
	http.ResponseWriter
	left int
}

func (l *limitWriter) Write(b []byte) (int, error) {
	n := len(b)
	if len(b) > l.left {
		b = b[:l.left]
	}
	l.left -= len(b)
	_, err := l.ResponseWriter.Write(b)
	return n, err
}

// selfSigned makes the log endpoint's certificate: the API server does not
// verify a kubelet's without --kubelet-certificate-authority.
func selfSigned(name, address string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(365 * 24 * time.Hour), DNSNames: []string{name},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if ip := net.ParseIP(address); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
