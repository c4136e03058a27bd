package kube

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/distribution/reference"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/servetune/servetune/internal/serving/engine"
)

// Part is one role of a disaggregated deployment: its engines, the
// replicas of one Deployment behind one Service.
type Part struct {
	Role     engine.Role
	Replicas int
	Settings engine.Settings // one engine's (engine.Part.Settings)
	Extra    []string        // its role's flags (engine.RoleArgs), then the space's extra_args
	GPUs     int             // one engine's
}

// Router is a disaggregated deployment's router: a process without GPUs
// in front of the parts' Services.
type Router struct {
	Argv       []string // its command, the parts' Service URLs (PartURL) and its port (engine.ContainerPort) filled
	Image      string   // "" = the engine's image
	HealthPath string   // "" = engine.HealthPath
}

// ValidImage refuses what is no container image reference
// ([registry/]name[:tag][@digest], as Docker and the kubelet read it): a
// pod with one would never start.
func ValidImage(ref string) error {
	if _, err := reference.ParseNormalizedNamed(ref); err != nil {
		return fmt.Errorf("%w: %q is not an image reference (%v); want e.g. ghcr.io/org/router:1.2 or NAME@sha256:DIGEST", ErrBadServe, ref, err)
	}
	return nil
}

// RouterCPU and RouterMemory are the router's requests: it forwards
// requests and holds none of the model.
var (
	RouterCPU    = resource.MustParse("1")
	RouterMemory = resource.MustParse("1Gi")
)

// PartName is the object name of role's Deployment and Service in the
// deployment s names.
func PartName(s Serve, role engine.Role) string { return dnsName(s.name() + "-" + string(role)) }

// PartURL is the base URL role's Service answers at in the namespace.
func PartURL(s Serve, role engine.Role) string {
	return "http://" + PartName(s, role) + ":" + strconv.Itoa(engine.ContainerPort)
}

// Disaggregated is a disaggregated deployment's manifests: per part a
// Deployment of its engines (Part.Replicas) and a Service, then the
// router's Deployment and the Service clients send to, named as s's
// aggregated Deployment would be.
func Disaggregated(s Serve, parts []Part, r Router) ([]any, error) {
	if len(parts) == 0 || len(r.Argv) == 0 {
		return nil, fmt.Errorf("%w: a disaggregated deployment needs its parts and a router command", ErrBadServe)
	}
	var objs []any
	for _, p := range parts {
		ps := s
		ps.Name = PartName(s, p.Role)
		ps.Settings, ps.Extra, ps.GPUs = p.Settings, p.Extra, p.GPUs
		d, svc, err := Deployment(ps)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p.Role, err)
		}
		n := int32(max(p.Replicas, 1))
		d.Spec.Replicas = &n
		if s.Engine == engine.VLLM && nixl(p.Extra) {
			// NixlConnector's side channel listens on the host it is
			// told (localhost by default); a pod's peers reach it at the
			// pod's IP (docs/spec.md, "The printed router").
			c := &d.Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "VLLM_NIXL_SIDE_CHANNEL_HOST",
				ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}})
		}
		objs = append(objs, d, svc)
	}
	if r.Image != "" {
		if err := ValidImage(r.Image); err != nil {
			return nil, fmt.Errorf("the router's image: %w", err)
		}
	}
	for _, a := range append([]string{r.Image}, r.Argv...) {
		if !utf8.ValidString(a) || strings.IndexFunc(a, Unwritable) >= 0 {
			return nil, fmt.Errorf("%w: the router's %q cannot be written as YAML", ErrBadServe, a)
		}
	}
	name := s.name()
	labels := map[string]string{"app.kubernetes.io/name": dnsName(name + "-router"), "app.kubernetes.io/component": "router"}
	image := r.Image
	if image == "" {
		image = s.image()
	}
	health := r.HealthPath
	if health == "" {
		health = engine.HealthPath
	}
	c := corev1.Container{
		Name:    "router",
		Image:   image,
		Command: r.Argv,
		Ports:   []corev1.ContainerPort{{Name: "http", ContainerPort: engine.ContainerPort, Protocol: corev1.ProtocolTCP}},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: RouterCPU.DeepCopy(), corev1.ResourceMemory: RouterMemory.DeepCopy()}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: health, Port: intstr.FromString("http")}},
			PeriodSeconds: 5, FailureThreshold: 3, TimeoutSeconds: 5},
	}
	one := int32(1)
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: dnsName(name + "-router"), Labels: labels, Annotations: s.annotations()},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: s.annotations()},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{c}},
			},
		},
	}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: s.annotations()},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: engine.ContainerPort, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP}},
		},
	}
	return append(objs, d, svc), nil
}

// nixl says whether a part's flags configure vLLM's NixlConnector.
func nixl(extra []string) bool {
	return slices.ContainsFunc(extra, func(a string) bool { return strings.Contains(a, "NixlConnector") })
}
