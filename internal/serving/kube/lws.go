package kube

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	lws "sigs.k8s.io/lws/api/leaderworkerset/v1"

	"github.com/servetune/servetune/internal/serving/engine"
)

// Multi-host replicas as a LeaderWorkerSet (sigs.k8s.io/lws v0.9.0: the
// typed API, so a field the controller does not know cannot be written):
// one group per replica, a pod per host, the leader (worker index 0)
// serving HTTP. The LWS webhook gives each pod LWS_LEADER_ADDRESS,
// LWS_GROUP_SIZE and LWS_WORKER_INDEX, which Kubernetes expands in args
// written $(VAR); a start rank that needs arithmetic goes through sh -c.
const (
	lwsDPRPCPort   = "13345" // vLLM's data-parallel handshake
	lwsRayPort     = "6379"
	lwsSGLangInit  = "5000"
	leaderAddress  = "$(" + lws.LwsLeaderAddress + ")"
	workerIndexVar = "$(" + lws.LwsWorkerIndex + ")"
)

// LeaderWorkerSet is s's replica of s.GPUs GPUs over pods of hostGPUs each
// (s.GPUs a multiple of hostGPUs, at least two pods) and a Service on its
// leaders.
func LeaderWorkerSet(s Serve, hostGPUs int) (*lws.LeaderWorkerSet, *corev1.Service, error) {
	if err := s.check(); err != nil {
		return nil, nil, err
	}
	if hostGPUs < 1 || s.GPUs <= hostGPUs || s.GPUs%hostGPUs != 0 {
		return nil, nil, fmt.Errorf("%w: %d GPUs over hosts of %d: want a multiple of at least two hosts", ErrBadServe, s.GPUs, hostGPUs)
	}
	hosts := s.GPUs / hostGPUs
	one := s
	one.GPUs = hostGPUs
	leader, err := one.container(string(s.Engine)+"-leader", engine.ContainerPort)
	if err != nil {
		return nil, nil, err
	}
	worker := *leader.DeepCopy()
	worker.Name = string(s.Engine) + "-worker"
	worker.StartupProbe, worker.ReadinessProbe, worker.LivenessProbe, worker.Ports = nil, nil, nil, nil
	switch s.Engine {
	case engine.SGLang:
		multi := []string{"--nnodes", strconv.Itoa(hosts), "--dist-init-addr", leaderAddress + ":" + lwsSGLangInit}
		leader.Args = append(append(leader.Args, multi...), "--node-rank", "0")
		worker.Args = append(append(worker.Args, multi...), "--node-rank", workerIndexVar)
	default:
		tp, _ := s.Settings.Int("tensor_parallel")
		pp, _ := s.Settings.Int("pipeline_parallel")
		rank := max(tp, 1) * max(pp, 1)
		base := append([]string{"vllm", "serve"}, leader.Args...)
		if rank <= hostGPUs && hostGPUs%rank == 0 {
			local := strconv.Itoa(hostGPUs / rank)
			dp := []string{"--data-parallel-size-local", local, "--data-parallel-address", leaderAddress, "--data-parallel-rpc-port", lwsDPRPCPort}
			leader.Args = append(leader.Args, dp...)
			worker.Command = []string{"sh", "-c"}
			worker.Args = []string{engine.ShellJoin(append(base, "--data-parallel-size-local", local, "--data-parallel-rpc-port", lwsDPRPCPort, "--headless")) +
				` --data-parallel-address "$` + lws.LwsLeaderAddress + `" --data-parallel-start-rank $((` + lws.LwsWorkerIndex + "*" + local + "))"}
		} else {
			leader.Command = []string{"sh", "-c"}
			leader.Args = []string{"ray start --head --port=" + lwsRayPort + " && exec " + engine.ShellJoin(append(base, "--distributed-executor-backend", "ray"))}
			worker.Command = []string{"sh", "-c"}
			worker.Args = []string{`ray start --address="$` + lws.LwsLeaderAddress + `":` + lwsRayPort + " --block"}
		}
	}
	pod := func(c corev1.Container) corev1.PodTemplateSpec {
		vols := []corev1.Volume{shmVolume()}
		if s.Local {
			vols = append(vols, s.modelVolume())
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "model", MountPath: ModelMount, ReadOnly: true})
		}
		sel, _ := s.nodeSelector()
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: s.labels(), Annotations: s.annotations()},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{c}, Volumes: vols, NodeSelector: sel, Tolerations: []corev1.Toleration{gpuToleration()}},
		}
	}
	size, replicas := int32(hosts), int32(1)
	lt := pod(leader)
	lt.Labels = map[string]string{"app.kubernetes.io/name": s.name(), "app.kubernetes.io/component": "inference-server", "role": "leader"}
	meta := metav1.ObjectMeta{Name: s.name(), Labels: s.labels(), Annotations: s.annotations()}
	set := &lws.LeaderWorkerSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: lws.GroupVersion.String(), Kind: "LeaderWorkerSet"},
		ObjectMeta: meta,
		Spec: lws.LeaderWorkerSetSpec{
			Replicas: &replicas,
			LeaderWorkerTemplate: lws.LeaderWorkerTemplate{
				Size:           &size,
				RestartPolicy:  lws.RecreateGroupOnPodRestart,
				LeaderTemplate: &lt,
				WorkerTemplate: pod(worker),
			},
			StartupPolicy: lws.LeaderReadyStartupPolicy,
			// The type the CRD requires (its only one); written out, since
			// the Go zero value serialises as "" and the server refuses it.
			RolloutStrategy: lws.RolloutStrategy{Type: lws.RollingUpdateStrategyType},
		},
	}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta,
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"leaderworkerset.sigs.k8s.io/name": s.name(), "role": "leader"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: engine.ContainerPort, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}},
		},
	}
	return set, svc, nil
}
