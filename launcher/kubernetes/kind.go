package kubernetes

import (
	"slices"

	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/yamlpos"
	"github.com/servetune/servetune/launcher"
	"github.com/servetune/servetune/launcher/simenv"
)

func init() {
	launcher.Register(launcher.Kind{
		Name: "kubernetes",
		Doc:  "a Deployment and a Service per trial in a Kubernetes namespace (client-go: kubeconfig or in-cluster); the scheduler places it on nvidia.com/gpu",
		Keys: append([]launcher.Key{
			{Name: "namespace", Doc: "the namespace of the trials' objects (default \"default\")"},
			{Name: "kubeconfig", Doc: "the kubeconfig file (default KUBECONFIG, ~/.kube/config, or the in-cluster config)"},
			{Name: "context", Doc: "the kubeconfig's context (default its current context)"},
			{Name: "image_pull_policy", Doc: "the engine container's imagePullPolicy: Always, IfNotPresent or Never (default: the cluster's)"},
			{Name: "access", Doc: "how the benchmark reaches the engine: auto (the Service in the cluster, else a port-forward), service, port-forward or pod-ip (default auto)"},
			{Name: "pending_timeout", Doc: "how long a trial's pod may stay unschedulable before the trial fails with the scheduler's reason (default 5m)"},
		}, append(simenv.Keys, launcher.Key{Name: "image", Doc: "the engine image (the docker kind's key; default: the engine's image)"})...),
		Decode:  decode,
		Cleanup: cleanup,
	})
}

// decode reads the kubernetes launcher's keys.
func decode(d *yamlpos.Decoder, keys map[string]*yaml.Node, c launcher.Common) launcher.Launcher {
	k := &Kube{PassEnv: c.Env, gpu: c.GPU, gpus: c.GPUs, scale: 1, Access: AccessAuto}
	str := func(key string) string {
		if x := keys[key]; x != nil {
			return d.Str(x, "launcher."+key)
		}
		return ""
	}
	k.Namespace, k.Kubeconfig, k.Context, k.Image = str("namespace"), str("kubeconfig"), str("context"), str("image")
	if k.Namespace != "" && len(validation.IsDNS1123Label(k.Namespace)) > 0 {
		d.Fail(keys["namespace"], "launcher.namespace", "%q is not a namespace name (DNS-1123 label)", k.Namespace)
	}
	if p := str("image_pull_policy"); p != "" {
		k.PullPolicy = corev1.PullPolicy(p)
		if !slices.Contains([]corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}, k.PullPolicy) {
			d.Fail(keys["image_pull_policy"], "launcher.image_pull_policy", "%q: want Always, IfNotPresent or Never", p)
		}
	}
	if a := str("access"); a != "" {
		k.Access = a
		if !slices.Contains([]string{AccessAuto, AccessService, AccessPortForward, AccessPodIP}, a) {
			d.Fail(keys["access"], "launcher.access", "%q: want auto, service, port-forward or pod-ip", a)
		}
	}
	if x := keys["pending_timeout"]; x != nil {
		k.PendingTimeout = d.Duration(x, "launcher.pending_timeout")
	}
	if !k.sim() {
		for _, key := range []string{"time_scale", "load_time"} {
			if keys[key] != nil {
				d.Fail(yamlpos.KeyNode(c.Section, key), "launcher."+key, "only for the simulated engine (launcher kind sim, or the servetune-sim image)")
				return nil
			}
		}
	}
	scale, load := simenv.DecodeKeys(d, keys)
	if d.Failed() {
		return nil
	}
	if k.sim() {
		lt := ""
		if load > 0 {
			lt = load.String()
		}
		k.Env = engine.SimEnv(c.GPU, 0, scale, lt)
		k.scale = scale
	}
	return k
}
