package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/servetune/servetune/internal/fleet"
	"github.com/servetune/servetune/internal/model/sim"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/serving/kube"
)

// planChoice is the policy the manifests deploy: the autoscaled policy
// with the fewest GPU-hours among those meeting the SLO for --goal of
// the requests, else the one meeting it for the most.
func planChoice(results []fleet.Result, goal float64) fleet.Result {
	best := -1
	for i, r := range results {
		if r.Policy.Scale == nil {
			continue
		}
		switch {
		case best < 0:
			best = i
		case (r.Attainment >= goal) != (results[best].Attainment >= goal):
			if r.Attainment >= goal {
				best = i
			}
		case r.Attainment >= goal && r.ReplicaHours < results[best].ReplicaHours,
			r.Attainment < goal && r.Attainment > results[best].Attainment:
			best = i
		}
	}
	return results[best]
}

// planK8s writes the chosen policy as manifests: the engine's Deployment
// and Service, one autoscaler on the scaling signal (--autoscaler: an
// autoscaling/v2 HorizontalPodAutoscaler or a KEDA ScaledObject; KEDA
// runs an HPA of its own, so the two on one Deployment would fight), and
// the router's configuration.
func planK8s(cmd *cobra.Command, cfg sim.Config, f *planFlags, _ planQuestion, rep planReport, results []fleet.Result) error {
	choice := planChoice(results, f.goal)
	sc := choice.Policy.Scale
	model := cfg.ModelID
	if cfg.Model.ID != "" {
		model = cfg.Model.ID // the catalog's Hugging Face id, not an alias
	}
	s := kube.Serve{Engine: cfg.Engine, Model: model, Settings: servedSettings(cfg), GPUs: cfg.NumGPUs, GPU: cfg.GPU.ID}
	d, svc, err := kube.Deployment(s)
	if err != nil {
		return usageError(err)
	}
	initial := int32(choice.Policy.Replicas)
	d.Spec.Replicas = &initial
	names := engine.Metrics(cfg.Engine)
	metric := names.Running[0]
	switch sc.Signal {
	case fleet.SignalWaiting:
		metric = names.Waiting[0]
	case fleet.SignalKV:
		metric = names.KVUsage[0]
	}
	scaling := kube.Scaling{Deployment: d.Name, Metric: metric, Model: model, Target: sc.Target, Min: sc.Min, Max: sc.Max,
		IntervalSeconds: int(sc.Interval), CooldownSeconds: int(sc.Cooldown), Prometheus: f.prometheus}
	rc := kube.RouterConfig{Policy: choice.Policy.Router, Signal: string(sc.Signal), Target: sc.Target, Endpoints: svc.Name}
	if rc.Policy == fleet.RouterPrefix {
		rc.LoadBound = fleet.DefaultPrefixBound
	}
	cm, err := kube.RouterConfigMap(d.Name+"-router", rc)
	if err != nil {
		return failedError(err)
	}
	l := planLine(choice, cfg.NumGPUs, rep.Price)
	scaler, needs := any(kube.HPA(scaling)), "prometheus-adapter serving "+kube.AdapterMetric(metric)+" as a pods metric"
	if f.autoscaler == "keda" {
		scaler, needs = kube.KEDAScaledObject(scaling), "KEDA's CRDs and controller, and Prometheus at "+f.prometheus
	}
	head := fmt.Sprintf("servetune plan: %s over %s: router %s, %s on %s (target %.3g per replica, %.0f%% of a replica's simulated capacity of %.2f req/s); simulated SLO attainment %.2f%%, peak %d and mean %.1f replicas, %.1f GPU-hours, $%.0f a day.\nThe %s autoscaler needs %s.",
		rep.Model, rep.Traffic, rc.Policy, sc.Signal, metric, sc.Target, 100*rep.Capacity.Headroom, rep.Capacity.Rate,
		100*l.Attainment, l.PeakReplicas, l.MeanReplicas, l.GPUHours, l.CostPerDay, f.autoscaler, needs)
	path := f.out
	if path == "" {
		path = stdoutPath
	}
	return writeOutput(cmd.OutOrStdout(), path, func(w io.Writer) error {
		if err := kube.Comment(w, head); err != nil {
			return err
		}
		return kube.Write(w, d, svc, scaler, cm)
	})
}

// servedSettings are the settings of cfg that the engine's command line
// carries: the simulator's own (its GPU, load time) and those the
// engine's release has no flag for are left out.
func servedSettings(cfg sim.Config) engine.Settings {
	out := engine.Settings{}
	for k, v := range cfg.Settings() {
		if _, err := engine.Render(cfg.Engine, engine.Settings{k: v}); err == nil {
			out[k] = v
		}
	}
	return out
}
