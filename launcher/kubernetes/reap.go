package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/servetune/servetune/launcher"
)

// Reap deletes what runs of study left in the launcher's namespace.
func (k *Kube) Reap(ctx context.Context, study string, keep func(launcher.Reaped) bool) ([]launcher.Reaped, error) {
	c, _, err := k.Client()
	if err != nil {
		return nil, err
	}
	return Reap(ctx, c, k.namespace(), study, keep)
}

// Reap deletes the trials servetune left in namespace ns (every namespace
// for ""): the Deployments, Services, ReplicaSets and Pods labelled
// servetune.io/managed (and, when study is not "", that study's hash)
// whose annotations launcher.ParseLabels reads, one trial at a time, all
// of a trial's objects or none of them. keep (may be nil) spares a live
// run's. It waits for the trials' pods to go.
func Reap(ctx context.Context, c kubernetes.Interface, ns, study string, keep func(launcher.Reaped) bool) ([]launcher.Reaped, error) {
	set := labels.Set{launcher.LabelManaged: "true"}
	if study != "" {
		set[LabelStudyID] = Hash(study)
	}
	opts := metav1.ListOptions{LabelSelector: set.String()}
	type found struct {
		ns, name string
		r        launcher.Reaped
		ok       bool
	}
	trials := map[string]*found{}
	add := func(m metav1.ObjectMeta, kind, state string) {
		inst := m.Labels[LabelInstance]
		if inst == "" {
			return
		}
		key := m.Namespace + "/" + inst
		f := trials[key]
		if f == nil {
			f = &found{ns: m.Namespace, name: inst}
			trials[key] = f
		}
		l, ok := launcher.ParseLabels(m.Annotations)
		if !ok || study != "" && l.Study != study || f.ok && kind != "deployment" {
			return
		}
		f.ok = true
		f.r = launcher.Reaped{Kind: "kubernetes", ID: m.Namespace + "/" + inst, Name: kind + "/" + m.Name, Study: l.Study,
			Trial: l.Trial, Owner: l.Owner, State: state}
	}
	ds, err := c.AppsV1().Deployments(ns).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: list deployments: %w", err)
	}
	for _, d := range ds.Items {
		state := "progressing"
		if d.Status.ReadyReplicas > 0 {
			state = "running"
		}
		add(d.ObjectMeta, "deployment", state)
	}
	svcs, err := c.CoreV1().Services(ns).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: list services: %w", err)
	}
	for _, s := range svcs.Items {
		add(s.ObjectMeta, "service", "orphaned")
	}
	rss, err := c.AppsV1().ReplicaSets(ns).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: list replicasets: %w", err)
	}
	for _, rs := range rss.Items {
		add(rs.ObjectMeta, "replicaset", "orphaned")
	}
	pods, err := c.CoreV1().Pods(ns).List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: list pods: %w", err)
	}
	for _, p := range pods.Items {
		add(p.ObjectMeta, "pod", string(p.Status.Phase))
	}
	keys := make([]string, 0, len(trials))
	for key := range trials {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	var out []launcher.Reaped
	var errs []error
	for _, key := range keys {
		f := trials[key]
		if !f.ok || keep != nil && keep(f.r) {
			continue
		}
		if err := deleteInstance(ctx, c, f.ns, f.name, 0); err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, f.r)
	}
	return out, errors.Join(errs...)
}

// cleanup deletes the study's trials (every servetune trial for study "")
// in every namespace of the default kubeconfig's cluster (or the
// in-cluster one). Without a kubeconfig, or when its cluster does not
// answer, there is nothing to clean: `servetune cleanup --spec` reports
// an unreachable cluster.
func cleanup(ctx context.Context, _ string, study string, keep func(launcher.Reaped) bool) ([]launcher.Reaped, error) {
	cfg, err := RESTConfig("", "")
	if err != nil {
		return nil, nil // no usable kubeconfig: no cluster of ours to clean
	}
	cfg.Timeout = 30 * time.Second
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	got, err := Reap(ctx, c, "", study, keep)
	var ue *url.Error
	var ne net.Error
	if errors.As(err, &ue) || errors.As(err, &ne) {
		return got, nil
	}
	return got, err
}
