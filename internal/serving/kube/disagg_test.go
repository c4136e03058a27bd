package kube

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/servetune/servetune/internal/serving/engine"
)

// TestDisaggregatedManifests: a Deployment and a Service per role, the
// router's Deployment in front, and the Service clients use selecting the
// router; each engine's command reads back with its role's flags.
func TestDisaggregatedManifests(t *testing.T) {
	s := Serve{Engine: engine.VLLM, Model: "meta-llama/Llama-3.1-8B-Instruct", GPU: "H100-SXM", HFSecret: "hf-token", Study: "d", Trial: 3}
	set := engine.Settings{"disaggregated": true, "prefill_replicas": 2, "decode_tensor_parallel": 2, "max_running_requests": 64}
	kv := engine.KVTransfer{}
	var parts []Part
	for _, p := range set.Parts() {
		if p.Index > 0 {
			parts[len(parts)-1].Replicas++
			continue
		}
		parts = append(parts, Part{Role: p.Role, Replicas: 1, Settings: p.Settings, GPUs: p.GPUs(), Extra: engine.RoleArgs(s.Engine, p.Role, kv)})
	}
	urls := map[engine.Role][]string{engine.Prefill: {PartURL(s, engine.Prefill)}, engine.Decode: {PartURL(s, engine.Decode)}}
	argv, err := engine.RouterArgv([]string{"python3", "proxy.py", "--port", "8000", "--prefiller-hosts", "{prefill_hosts}", "--decoder-hosts", "{decode_hosts}"}, nil, nil, urls, "servetune")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Disaggregated(s, parts, Router{Argv: argv})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Write(&buf, objs...); err != nil {
		t.Fatal(err)
	}
	ds := docs(t, buf.Bytes())
	if len(ds) != 6 {
		t.Fatalf("%d manifests, want a Deployment and a Service for prefill, decode and the router", len(ds))
	}
	var prefill, decode, router appsv1.Deployment
	var entry corev1.Service
	strict(t, ds[0], &prefill)
	strict(t, ds[2], &decode)
	strict(t, ds[4], &router)
	strict(t, ds[5], &entry)
	if prefill.Name != "vllm-llama-3-1-8b-instruct-prefill" || *prefill.Spec.Replicas != 2 {
		t.Errorf("prefill Deployment %s with %d replicas", prefill.Name, *prefill.Spec.Replicas)
	}
	gpus := decode.Spec.Template.Spec.Containers[0].Resources.Limits[GPUResource]
	if gpus.Value() != 2 || *decode.Spec.Replicas != 1 {
		t.Errorf("decode: %d GPUs, %d replicas; want 2 and 1", gpus.Value(), *decode.Spec.Replicas)
	}
	for _, d := range []appsv1.Deployment{prefill, decode} {
		args := d.Spec.Template.Spec.Containers[0].Args
		c, err := engine.ParseCommand(args, nil)
		if err != nil {
			t.Fatalf("%s: %v", d.Name, err)
		}
		if cfg, _ := c.Settings.String("kv_transfer_config"); cfg != engine.DefaultKVTransferConfig {
			t.Errorf("%s: kv_transfer_config %q", d.Name, cfg)
		}
		if _, ok := c.Settings["disaggregated"]; ok {
			t.Errorf("%s carries the shape", d.Name)
		}
		// NixlConnector's peers reach its side channel at the pod's IP.
		env := d.Spec.Template.Spec.Containers[0].Env
		i := slices.IndexFunc(env, func(e corev1.EnvVar) bool { return e.Name == "VLLM_NIXL_SIDE_CHANNEL_HOST" })
		if i < 0 || env[i].ValueFrom == nil || env[i].ValueFrom.FieldRef == nil || env[i].ValueFrom.FieldRef.FieldPath != "status.podIP" {
			t.Errorf("%s: no VLLM_NIXL_SIDE_CHANNEL_HOST from the pod's IP in %+v", d.Name, env)
		}
	}
	rc := router.Spec.Template.Spec.Containers[0]
	if !slices.Contains(rc.Command, "vllm-llama-3-1-8b-instruct-prefill") || len(rc.Resources.Limits) != 0 {
		t.Errorf("router: %v, limits %v", rc.Command, rc.Resources.Limits)
	}
	if entry.Name != "vllm-llama-3-1-8b-instruct" || entry.Spec.Selector["app.kubernetes.io/component"] != "router" {
		t.Errorf("entry Service %s selects %v", entry.Name, entry.Spec.Selector)
	}
	if _, err := Disaggregated(s, parts, Router{Argv: []string{"proxy\u0085"}}); err == nil || !strings.Contains(err.Error(), "router") {
		t.Errorf("a router argv YAML cannot carry: %v", err)
	}
}
