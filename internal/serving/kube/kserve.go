package kube

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/servetune/servetune/internal/serving/engine"
)

// KServe's resources, typed with the fields servetune writes. KServe's Go
// types live in github.com/kserve/kserve, whose module brings Knative,
// Istio and a controller runtime along: these few structs, with the same
// JSON names, cost less than that. Their field names follow KServe's
// serving.kserve.io CRDs (v1alpha1 ServingRuntime, v1beta1
// InferenceService); their container, volume, toleration and resource
// fields are k8s.io/api's.

// ServingRuntime is a serving.kserve.io/v1alpha1 ServingRuntime: the
// engine's image and command, which InferenceServices name.
type ServingRuntime struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ServingRuntimeSpec `json:"spec"`
}

// ServingRuntimeSpec is the part of KServe's ServingRuntimeSpec written.
type ServingRuntimeSpec struct {
	SupportedModelFormats []SupportedModelFormat `json:"supportedModelFormats,omitempty"`
	MultiModel            *bool                  `json:"multiModel,omitempty"`
	ProtocolVersions      []string               `json:"protocolVersions,omitempty"`
	Annotations           map[string]string      `json:"annotations,omitempty"`
	Containers            []corev1.Container     `json:"containers"`
	Volumes               []corev1.Volume        `json:"volumes,omitempty"`
}

// SupportedModelFormat is a model format a runtime serves.
type SupportedModelFormat struct {
	Name       string `json:"name"`
	AutoSelect *bool  `json:"autoSelect,omitempty"`
}

// InferenceService is a serving.kserve.io/v1beta1 InferenceService.
type InferenceService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              InferenceServiceSpec `json:"spec"`
}

// InferenceServiceSpec holds the predictor.
type InferenceServiceSpec struct {
	Predictor PredictorSpec `json:"predictor"`
}

// PredictorSpec is the part of KServe's PredictorSpec written: the model
// and the pod fields that place it.
type PredictorSpec struct {
	Model        *ModelSpec          `json:"model,omitempty"`
	MinReplicas  *int32              `json:"minReplicas,omitempty"`
	MaxReplicas  int32               `json:"maxReplicas,omitempty"`
	NodeSelector map[string]string   `json:"nodeSelector,omitempty"`
	Tolerations  []corev1.Toleration `json:"tolerations,omitempty"`
}

// ModelSpec is the predictor's model: its format, the runtime, and the
// container fields merged into the runtime's container (args are appended
// to the runtime's).
type ModelSpec struct {
	ModelFormat      ModelFormat `json:"modelFormat"`
	Runtime          *string     `json:"runtime,omitempty"`
	StorageURI       *string     `json:"storageUri,omitempty"`
	corev1.Container `json:",inline"`
}

// ModelFormat names a model's format.
type ModelFormat struct {
	Name string `json:"name"`
}

// KServePort is the port the runtime's container listens on: KServe's
// default for a predictor.
const KServePort = 8080

// KServeContainer is the name KServe gives a predictor's container.
const KServeContainer = "kserve-container"

// KServe is the engine as a ServingRuntime (image, command, probes,
// /dev/shm) and an InferenceService of one replica (the model, its
// settings, its GPUs and where it runs), deployed raw: no Knative, no
// scale to zero that would unload a model from its GPUs.
func KServe(s Serve) (*ServingRuntime, *InferenceService, error) {
	if err := s.check(); err != nil {
		return nil, nil, err
	}
	c, err := s.container(KServeContainer, KServePort)
	if err != nil {
		return nil, nil, err
	}
	// The runtime keeps the engine's command and where it listens; the
	// model and its settings go to the InferenceService.
	cmd, args, _ := s.command(KServePort)
	modelArgs := args
	switch s.Engine {
	case engine.SGLang:
		// --model-path MODEL flags... --host 0.0.0.0 --port 8080
		c.Args, modelArgs = args[len(args)-4:], args[:len(args)-4]
	default:
		// --model MODEL flags... --port 8080
		c.Args, modelArgs = args[len(args)-2:], args[:len(args)-2]
	}
	c.Command = cmd
	model := corev1.Container{Name: KServeContainer, Args: modelArgs, Env: c.Env, Resources: c.Resources}
	c.Env, c.Resources = nil, corev1.ResourceRequirements{}
	yes, no := true, false
	format := formatName(s.Engine)
	name := s.name()
	rt := &ServingRuntime{
		TypeMeta:   metav1.TypeMeta{APIVersion: "serving.kserve.io/v1alpha1", Kind: "ServingRuntime"},
		ObjectMeta: metav1.ObjectMeta{Name: name + "-runtime", Labels: s.labels(), Annotations: s.annotations()},
		Spec: ServingRuntimeSpec{
			SupportedModelFormats: []SupportedModelFormat{{Name: format, AutoSelect: &yes}},
			MultiModel:            &no,
			Annotations:           map[string]string{"prometheus.io/port": "8080", "prometheus.io/path": "/metrics"},
			Containers:            []corev1.Container{c},
			Volumes:               []corev1.Volume{shmVolume()},
		},
	}
	ann := map[string]string{"serving.kserve.io/deploymentMode": "RawDeployment"}
	for k, v := range s.annotations() {
		ann[k] = v
	}
	sel, _ := s.nodeSelector()
	runtime := rt.Name
	// A local model comes from its claim: KServe's storage initializer
	// mounts a pvc:// URI at ModelMount.
	var storage *string
	if s.Local {
		uri := "pvc://" + s.claim()
		storage = &uri
	}
	one := int32(1)
	isvc := &InferenceService{
		TypeMeta:   metav1.TypeMeta{APIVersion: "serving.kserve.io/v1beta1", Kind: "InferenceService"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: s.labels(), Annotations: ann},
		Spec: InferenceServiceSpec{Predictor: PredictorSpec{
			Model:        &ModelSpec{ModelFormat: ModelFormat{Name: format}, Runtime: &runtime, StorageURI: storage, Container: model},
			MinReplicas:  &one,
			MaxReplicas:  1,
			NodeSelector: sel,
			Tolerations:  []corev1.Toleration{gpuToleration()},
		}},
	}
	return rt, isvc, nil
}

// formatName is the model format a runtime of engine e declares, as
// OpenShift AI's vLLM runtime names it.
func formatName(e engine.Engine) string {
	if e == engine.SGLang {
		return "sglang"
	}
	return "vLLM"
}
