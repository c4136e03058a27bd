package kube

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Scaling is target tracking of a Deployment on an engine gauge: the
// fleet plan's autoscaler (internal/fleet) as Kubernetes runs it.
type Scaling struct {
	Deployment string // the Deployment scaled
	// Metric is the engine's gauge as its /metrics names it
	// (vllm:num_requests_running); Model its model_name label.
	Metric, Model string
	Target        float64 // per replica
	Min, Max      int
	// IntervalSeconds is how often the gauge is read and averaged;
	// CooldownSeconds the scale-down stabilization window.
	IntervalSeconds, CooldownSeconds int
	// Prometheus is the server KEDA queries.
	Prometheus string
}

// AdapterMetric is a Prometheus metric's name as the custom metrics API
// serves it through prometheus-adapter's usual rule, which cannot keep
// the colon: vllm:num_requests_running is vllm_num_requests_running.
func AdapterMetric(name string) string { return strings.ReplaceAll(name, ":", "_") }

// quantity is v as a Kubernetes quantity, in thousandths.
func quantity(v float64) resource.Quantity {
	return *resource.NewMilliQuantity(int64(v*1000+0.5), resource.DecimalSI)
}

// HPA is an autoscaling/v2 HorizontalPodAutoscaler on the engine gauge
// as a Pods metric (its AverageValue the target per replica; served by
// prometheus-adapter as AdapterMetric), with the stabilization window
// on the way down.
func HPA(s Scaling) *autoscalingv2.HorizontalPodAutoscaler {
	minR, window := int32(s.Min), int32(s.CooldownSeconds)
	q := quantity(s.Target)
	return &autoscalingv2.HorizontalPodAutoscaler{
		TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
		ObjectMeta: metav1.ObjectMeta{Name: s.Deployment, Labels: map[string]string{"app.kubernetes.io/name": s.Deployment}},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: s.Deployment},
			MinReplicas:    &minR,
			MaxReplicas:    int32(s.Max),
			Metrics: []autoscalingv2.MetricSpec{{
				Type: autoscalingv2.PodsMetricSourceType,
				Pods: &autoscalingv2.PodsMetricSource{
					Metric: autoscalingv2.MetricIdentifier{Name: AdapterMetric(s.Metric)},
					Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &q},
				},
			}},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: &window},
			},
		},
	}
}

// KEDA's ScaledObject is written as an unstructured object (apiVersion
// keda.sh/v1alpha1): KEDA's Go module is not among this repository's
// dependencies. Its fields are those of KEDA v2's ScaledObject spec
// (scaleTargetRef, pollingInterval, cooldownPeriod, minReplicaCount,
// maxReplicaCount, advanced.horizontalPodAutoscalerConfig.behavior,
// triggers) and of its prometheus trigger (serverAddress, query,
// threshold: the query's value per replica, a decimal number, as the
// scaler parses it with strconv.ParseFloat).

// KEDAScaledObject is a KEDA ScaledObject scaling the Deployment on a
// Prometheus query: the gauge summed over the model's engines, averaged
// over the interval, against the target per replica.
func KEDAScaledObject(s Scaling) *unstructured.Unstructured {
	query := fmt.Sprintf("sum(avg_over_time(%s{model_name=%q}[%ds]))", s.Metric, s.Model, s.IntervalSeconds)
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "keda.sh/v1alpha1",
		"kind":       "ScaledObject",
		"metadata":   map[string]any{"name": s.Deployment, "labels": map[string]any{"app.kubernetes.io/name": s.Deployment}},
		"spec": map[string]any{
			"scaleTargetRef":  map[string]any{"name": s.Deployment},
			"pollingInterval": int64(s.IntervalSeconds),
			"cooldownPeriod":  int64(s.CooldownSeconds),
			"minReplicaCount": int64(s.Min),
			"maxReplicaCount": int64(s.Max),
			"advanced": map[string]any{"horizontalPodAutoscalerConfig": map[string]any{"behavior": map[string]any{
				"scaleDown": map[string]any{"stabilizationWindowSeconds": int64(s.CooldownSeconds)}}}},
			"triggers": []any{map[string]any{
				"type": "prometheus",
				"metadata": map[string]any{
					"serverAddress": s.Prometheus,
					"query":         query,
					"threshold":     strconv.FormatFloat(math.Round(s.Target*1000)/1000, 'f', -1, 64),
				},
			}},
		},
	}}
}

// RouterConfig is how the fleet's router picks an engine, for the
// router in front of the Deployment (the key router.yaml of a
// ConfigMap): the policy and, for the prefix-aware one, its load bound.
type RouterConfig struct {
	Policy string `json:"policy"`
	// LoadBound: an engine is a candidate while its outstanding
	// requests, with the new one, stay within this times the mean.
	LoadBound float64 `json:"loadBound,omitempty"`
	// Signal and Target are the autoscaler's, for the router's own
	// saturation checks.
	Signal string  `json:"scaleSignal"`
	Target float64 `json:"scaleTarget"`
	// Endpoints is the Service the engines are reached by.
	Endpoints string `json:"endpoints"`
}

// RouterConfigMap is the router's configuration as a ConfigMap (key
// router.yaml), written by sigs.k8s.io/yaml.
func RouterConfigMap(name string, c RouterConfig) (*corev1.ConfigMap, error) {
	b, err := yaml.Marshal(c)
	if err != nil {
		return nil, err
	}
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/component": "router"}},
		Data:       map[string]string{"router.yaml": string(b)},
	}, nil
}
