package engine_test

import (
	"fmt"
	"strings"

	"github.com/servetune/servetune/internal/serving/engine"
)

func ExampleRender() {
	s := engine.Settings{"tensor_parallel": 2, "gpu_memory_fraction": 0.88, "prefix_caching": false, "kv_cache_dtype": "fp8"}
	v, _ := engine.Render(engine.VLLM, s)
	g, _ := engine.Render(engine.SGLang, s)
	fmt.Println(strings.Join(v, " "))
	fmt.Println(strings.Join(g, " "))
	// Output:
	// --tensor-parallel-size 2 --gpu-memory-utilization 0.88 --kv-cache-dtype fp8 --no-enable-prefix-caching
	// --tp-size 2 --mem-fraction-static 0.88 --kv-cache-dtype fp8_e4m3 --disable-radix-cache
}
