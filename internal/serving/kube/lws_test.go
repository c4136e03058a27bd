package kube

import (
	"bytes"
	"strings"
	"testing"

	lws "sigs.k8s.io/lws/api/leaderworkerset/v1"
	"sigs.k8s.io/yaml"

	"github.com/servetune/servetune/internal/serving/engine"
)

// A 16-GPU replica over two 8-GPU hosts writes a LeaderWorkerSet of two
// pods that decodes strictly into the LWS v0.9.0 types, with each
// engine's multi-node flags on the leader and the worker.
func TestLeaderWorkerSet(t *testing.T) {
	for _, tt := range []struct {
		e            engine.Engine
		set          engine.Settings
		leader, work []string
	}{
		{engine.VLLM, engine.Settings{"tensor_parallel": 1, "data_parallel": 16, "expert_parallel": true},
			[]string{"--data-parallel-size-local 8", "--data-parallel-address $(LWS_LEADER_ADDRESS)", "--enable-expert-parallel"},
			[]string{"sh -c", "--headless", "--data-parallel-start-rank $((LWS_WORKER_INDEX*8))", `--data-parallel-address "$LWS_LEADER_ADDRESS"`}},
		{engine.VLLM, engine.Settings{"tensor_parallel": 8, "pipeline_parallel": 2},
			[]string{"ray start --head", "--distributed-executor-backend ray", "--pipeline-parallel-size 2"},
			[]string{`ray start --address="$LWS_LEADER_ADDRESS":6379 --block`}},
		{engine.SGLang, engine.Settings{"tensor_parallel": 1, "data_parallel": 16, "dp_attention": true, "expert_parallel": true},
			[]string{"--nnodes 2", "--node-rank 0", "--dist-init-addr $(LWS_LEADER_ADDRESS):5000", "--tp-size 16"},
			[]string{"--node-rank $(LWS_WORKER_INDEX)", "--nnodes 2"}},
	} {
		s := Serve{Engine: tt.e, Model: "deepseek-ai/DeepSeek-V3", Settings: tt.set, GPUs: 16, GPU: "H100-SXM"}
		set, svc, err := LeaderWorkerSet(s, 8)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := Write(&b, set, svc); err != nil {
			t.Fatal(err)
		}
		doc := strings.SplitN(b.String(), "\n---\n", 2)[0]
		var got lws.LeaderWorkerSet
		if err := yaml.UnmarshalStrict([]byte(doc), &got); err != nil {
			t.Fatalf("%s: %v\n%s", tt.e, err, doc)
		}
		tpl := got.Spec.LeaderWorkerTemplate
		if got.Kind != "LeaderWorkerSet" || got.APIVersion != "leaderworkerset.x-k8s.io/v1" || *tpl.Size != 2 || tpl.LeaderTemplate == nil {
			t.Fatalf("%s: %+v", tt.e, got)
		}
		line := func(c []string, a []string) string { return strings.Join(append(append([]string{}, c...), a...), " ") }
		lc, wc := tpl.LeaderTemplate.Spec.Containers[0], tpl.WorkerTemplate.Spec.Containers[0]
		if q := lc.Resources.Limits[GPUResource]; q.Value() != 8 {
			t.Errorf("%s: leader asks %v GPUs", tt.e, q.Value())
		}
		for _, w := range tt.leader {
			if !strings.Contains(line(lc.Command, lc.Args), w) {
				t.Errorf("%s leader lacks %q: %s", tt.e, w, line(lc.Command, lc.Args))
			}
		}
		for _, w := range tt.work {
			if !strings.Contains(line(wc.Command, wc.Args), w) {
				t.Errorf("%s worker lacks %q: %s", tt.e, w, line(wc.Command, wc.Args))
			}
		}
	}
	if _, _, err := LeaderWorkerSet(Serve{Engine: engine.VLLM, Model: "m", GPUs: 8}, 8); err == nil {
		t.Error("one host: no error")
	}
}
