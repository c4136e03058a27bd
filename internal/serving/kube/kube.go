package kube

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/servetune/servetune/internal/serving/catalog"
	"github.com/servetune/servetune/internal/serving/engine"
	"github.com/servetune/servetune/internal/term"
)

// Serve is one configuration to deploy: what `recommend` prints as a serve
// command, and the facts a cluster needs beside it.
type Serve struct {
	Name   string // object name; "" = from the model (DNS-1123)
	Engine engine.Engine
	Model  string // a hub id, or a local model's directory on this host (Local)
	// Local says Model is a directory on this host: the pod reads the
	// model from the PersistentVolumeClaim ModelClaim ("" = the objects'
	// name + "-model"), which holds the directory's files at its root,
	// and serves it under the name Model, as the study measured it.
	Local      bool
	ModelClaim string
	Settings   engine.Settings
	Extra      []string // flags after the settings (a space's extra_args)
	GPUs       int      // GPUs of one replica
	GPU        string   // catalog GPU id, for the node selector; "" = none
	Image      string   // "" = engine.DefaultImage
	// HFSecret names the Secret whose key HFSecretKey holds the Hugging
	// Face token, handed to the engine as HF_TOKEN; "" = no token.
	HFSecret string
	Study    string // annotated, so a deployment is traced to its study
	Trial    int
}

// ModelMount is where a local model's claim is mounted: KServe's own
// mount point for a storageUri, so both forms run the same command.
const ModelMount = "/mnt/models"

// Each pod requests the CPUs and memory its engine's processes use: the
// API server and the scheduler each keep a core busy, and each GPU has a
// worker process (tensor parallelism) that drives it and holds its CUDA
// context and pinned buffers in host memory. No CPU or memory limit: a
// throttled scheduler stalls every GPU, and a memory limit would kill the
// engine while it maps its weights.
var (
	CPUBase      = resource.MustParse("2")
	CPUPerGPU    = resource.MustParse("2")
	MemoryBase   = resource.MustParse("8Gi")
	MemoryPerGPU = resource.MustParse("8Gi")
)

// HFSecretKey is the key of the token in the Secret Serve.HFSecret names
// (`kubectl create secret generic NAME --from-literal=token=hf_...`).
const HFSecretKey = "token"

// GPUResource is the extended resource NVIDIA's device plugin advertises.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// GPUProductLabel is the node label NVIDIA's GPU feature discovery sets to
// the GPU's product name (NVML's name, spaces as dashes).
const GPUProductLabel = "nvidia.com/gpu.product"

// ShmSize is the size of the /dev/shm volume: the engines' workers share
// tensors through it (PyTorch, NCCL), and a pod's default 64 MiB is too
// small for tensor parallelism.
var ShmSize = resource.MustParse("16Gi")

// ErrBadServe is wrapped by errors about a Serve that cannot be deployed.
var ErrBadServe = errors.New("cannot write manifests")

var dnsUnsafe = regexp.MustCompile(`[^a-z0-9-]+`)

// dnsName makes a DNS-1123 label of s (at most 63 characters).
func dnsName(s string) string {
	n := strings.Trim(dnsUnsafe.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if len(n) > 63 {
		n = strings.Trim(n[:63], "-")
	}
	return n
}

// name is the objects' name.
func (s Serve) name() string {
	if s.Name != "" {
		return dnsName(s.Name)
	}
	model := s.Model
	if i := strings.LastIndex(model, "/"); i >= 0 {
		model = model[i+1:]
	}
	return dnsName(string(s.Engine) + "-" + model)
}

func (s Serve) check() error {
	if !s.Engine.Valid() {
		return fmt.Errorf("%w: engine %q (want vllm or sglang)", ErrBadServe, s.Engine)
	}
	if s.Model == "" || s.GPUs < 1 {
		return fmt.Errorf("%w: a model and at least one GPU are needed", ErrBadServe)
	}
	if s.name() == "" {
		return fmt.Errorf("%w: no usable object name in %q", ErrBadServe, s.Name)
	}
	flags, _ := engine.Render(s.Engine, s.Settings)
	for what, v := range map[string]string{"model": s.Model, "study": s.Study, "image": s.Image,
		"extra_args": strings.Join(s.Extra, " "), "settings": strings.Join(flags, " ")} {
		if !utf8.ValidString(v) {
			return fmt.Errorf("%w: the %s %q is not UTF-8", ErrBadServe, what, v)
		}
		if i := strings.IndexFunc(v, Unwritable); i >= 0 {
			return fmt.Errorf("%w: the %s %q holds %U, which YAML cannot carry", ErrBadServe, what, v, []rune(v[i:])[0])
		}
	}
	for what, n := range map[string]string{"secret": s.HFSecret, "claim": s.ModelClaim} {
		if n != "" && len(validation.IsDNS1123Subdomain(n)) > 0 {
			return fmt.Errorf("%w: %s name %q is not a DNS-1123 name", ErrBadServe, what, n)
		}
	}
	_, err := s.nodeSelector()
	return err
}

// Unwritable reports whether r is a character a YAML stream cannot carry
// back unchanged, even escaped by the encoder: DEL, the C1 controls (YAML
// 1.1's printable set, which sigs.k8s.io/yaml's parser enforces, and NEL,
// which a parser folds into a space), U+FFFE and U+FFFF.
func Unwritable(r rune) bool {
	return r == 0x7f || r >= 0x80 && r <= 0x9f || r == 0xfffe || r == 0xffff
}

// nodeSelector picks nodes by the GPU's product label.
func (s Serve) nodeSelector() (map[string]string, error) {
	if s.GPU == "" {
		return nil, nil
	}
	g, err := catalog.LookupGPU(s.GPU)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadServe, err)
	}
	if !strings.HasPrefix(g.Name, "NVIDIA ") {
		return nil, fmt.Errorf("%w: %s is not an NVIDIA GPU: the manifests ask for %s", ErrBadServe, g.Name, GPUResource)
	}
	return map[string]string{GPUProductLabel: strings.ReplaceAll(g.Name, " ", "-")}, nil
}

func (s Serve) image() string {
	if s.Image != "" {
		return s.Image
	}
	return engine.DefaultImage(s.Engine)
}

// command splits the engine's container command line at port into the
// container's command (SGLang's image has no entry point) and args (vLLM's
// image's entry point is `vllm serve`).
func (s Serve) command(port int) (cmd, args []string, err error) {
	flags, err := engine.Render(s.Engine, s.Settings)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrBadServe, err)
	}
	model := s.Model
	if s.Local {
		model = ModelMount
		name := engine.Flag(s.Engine, "served_model_name")
		if !slices.ContainsFunc(s.Extra, func(a string) bool { return a == name || strings.HasPrefix(a, name+"=") }) {
			flags = append(flags, name, s.Model)
		}
	}
	argv := engine.ContainerArgs(s.Engine, model, append(flags, s.Extra...), port)
	if s.Engine == engine.SGLang {
		return argv[:3], argv[3:], nil
	}
	return nil, argv, nil
}

func (s Serve) labels() map[string]string {
	return map[string]string{"app.kubernetes.io/name": s.name(), "app.kubernetes.io/component": "inference-server"}
}

func (s Serve) annotations() map[string]string {
	if s.Study == "" {
		return nil
	}
	return map[string]string{"servetune.io/study": s.Study, "servetune.io/trial": strconv.Itoa(s.Trial)}
}

// container is the engine's container listening on port.
func (s Serve) container(name string, port int) (corev1.Container, error) {
	cmd, args, err := s.command(port)
	if err != nil {
		return corev1.Container{}, err
	}
	gpus := *resource.NewQuantity(int64(s.GPUs), resource.DecimalSI)
	cpu, mem := CPUBase.DeepCopy(), MemoryBase.DeepCopy()
	for range s.GPUs {
		cpu.Add(CPUPerGPU)
		mem.Add(MemoryPerGPU)
	}
	probe := func(period, failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: engine.HealthPath, Port: intstr.FromString("http")}},
			PeriodSeconds:    period,
			FailureThreshold: failures,
			TimeoutSeconds:   5,
		}
	}
	c := corev1.Container{
		Name:    name,
		Image:   s.image(),
		Command: cmd,
		Args:    args,
		Ports:   []corev1.ContainerPort{{Name: "http", ContainerPort: int32(port), Protocol: corev1.ProtocolTCP}},
		// Extended resources are requested by their limit.
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{GPUResource: gpus},
			Requests: corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem}},
		VolumeMounts: []corev1.VolumeMount{{Name: "shm", MountPath: "/dev/shm"}},
		// Loading weights takes minutes: the startup probe allows 30 of
		// them before liveness counts.
		StartupProbe:   probe(10, 180),
		ReadinessProbe: probe(5, 3),
		LivenessProbe:  probe(10, 3),
	}
	if s.HFSecret != "" {
		c.Env = []corev1.EnvVar{{Name: "HF_TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: s.HFSecret}, Key: HFSecretKey}}}}
	}
	return c, nil
}

// claim is the PersistentVolumeClaim of a local model.
func (s Serve) claim() string {
	if s.ModelClaim != "" {
		return s.ModelClaim
	}
	return DefaultClaim(s)
}

// DefaultClaim is the claim of a local model that names none: the objects'
// name and "-model".
func DefaultClaim(s Serve) string { return dnsName(s.name() + "-model") }

// modelVolume is a local model's claim, read-only.
func (s Serve) modelVolume() corev1.Volume {
	return corev1.Volume{Name: "model", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
		ClaimName: s.claim(), ReadOnly: true}}}
}

// shmVolume is /dev/shm in memory.
func shmVolume() corev1.Volume {
	return corev1.Volume{Name: "shm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &ShmSize}}}
}

// gpuToleration lets the pods onto nodes tainted for GPU work (as GKE and
// many clusters taint them).
func gpuToleration() corev1.Toleration {
	return corev1.Toleration{Key: string(GPUResource), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}
}

// Deployment is the engine as a Deployment of one replica and a Service in
// front of it, on the engine's port.
func Deployment(s Serve) (*appsv1.Deployment, *corev1.Service, error) {
	if err := s.check(); err != nil {
		return nil, nil, err
	}
	c, err := s.container(string(s.Engine), engine.ContainerPort)
	if err != nil {
		return nil, nil, err
	}
	vols := []corev1.Volume{shmVolume()}
	if s.Local {
		vols = append(vols, s.modelVolume())
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "model", MountPath: ModelMount, ReadOnly: true})
	}
	sel, _ := s.nodeSelector()
	one := int32(1)
	meta := metav1.ObjectMeta{Name: s.name(), Labels: s.labels(), Annotations: s.annotations()}
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: meta,
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: s.labels()},
			// A rolling update would need a second set of GPUs.
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: s.labels(), Annotations: s.annotations()},
				Spec: corev1.PodSpec{
					Containers:   []corev1.Container{c},
					Volumes:      vols,
					NodeSelector: sel,
					Tolerations:  []corev1.Toleration{gpuToleration()},
				},
			},
		},
	}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta,
		Spec: corev1.ServiceSpec{
			Selector: s.labels(),
			Ports:    []corev1.ServicePort{{Name: "http", Port: engine.ContainerPort, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}},
		},
	}
	return d, svc, nil
}

// Comment writes text as YAML comment lines, each line of it behind "# ":
// text from a spec or a model path can hold a line break (YAML's
// line breaks include CR, NEL and the Unicode separators), and a line that
// escaped the comment would be read as manifest. Control characters are
// written as escapes (internal/term), so none is left to break a line.
func Comment(w io.Writer, text string) error {
	var b strings.Builder
	for _, l := range strings.Split(term.Clean(text), "\n") {
		b.WriteString(strings.TrimRight("# "+l, " ") + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Write writes objects as one YAML stream, each marshalled from its type
// by sigs.k8s.io/yaml (through its JSON tags, as kubectl reads them).
func Write(w io.Writer, objs ...any) error {
	var b bytes.Buffer
	for i, o := range objs {
		y, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(y)
	}
	_, err := w.Write(b.Bytes())
	return err
}
