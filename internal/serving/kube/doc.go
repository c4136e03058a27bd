// Package kube writes a serve configuration as Kubernetes manifests, the
// form a fleet deploys: a Deployment and a Service (Deployment), or a
// KServe ServingRuntime and InferenceService (KServe, as OpenShift AI
// deploys models). The objects are built from k8s.io/api's types (KServe's
// two as small typed structs here, see kserve.go) and written by
// sigs.k8s.io/yaml, never from text templates.
//
// From the engine vocabulary (package engine): the image
// (engine.DefaultImage unless Serve.Image), the command line
// (engine.ContainerArgs: vLLM's image takes `--model M [flags]`, SGLang's
// runs `python3 -m sglang.launch_server`), the port and the health
// endpoint (engine.HealthPath) that the startup, readiness and liveness
// probes ask. The pod asks for the configuration's GPUs as nvidia.com/gpu
// limits, mounts a 16 GiB in-memory /dev/shm, takes HF_TOKEN from a Secret
// by name (key "token", never a value), tolerates the nvidia.com/gpu taint
// and selects nodes by NVIDIA's GPU product label (nvidia.com/gpu.product,
// from the catalog's GPU name). Only NVIDIA GPUs are written. It requests
// CPUs and memory by its GPUs (CPUBase, CPUPerGPU, MemoryBase,
// MemoryPerGPU) and runs Serve.Image, by default the image of the newest
// release the flag table knows (engine.DefaultImage). A local model (Serve.Local) is read from a
// PersistentVolumeClaim mounted read-only at ModelMount (KServe: a pvc://
// storageUri, which KServe mounts there) and served under its study's name.
//
// Text from a spec reaches a manifest only as values the encoder quotes,
// or through Comment, which comments every line; a value YAML cannot carry
// back unchanged (not UTF-8, DEL, a C1 control) is refused.
//
// Example:
//
//	d, svc, err := kube.Deployment(kube.Serve{Engine: engine.VLLM, Model: "meta-llama/Llama-3.1-8B-Instruct",
//		Settings: engine.Settings{"tensor_parallel": 2}, GPUs: 2, GPU: "H100-SXM", HFSecret: "hf-token"})
//	if err != nil {
//		return err
//	}
//	return kube.Write(os.Stdout, d, svc)
//
// Everything here is a pure function of its input.
package kube
