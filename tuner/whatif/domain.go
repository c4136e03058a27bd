package whatif

import (
	"fmt"
	"strconv"

	"github.com/servetune/servetune/internal/serving/catalog"
	"github.com/servetune/servetune/internal/serving/engine"
)

// Past one node: tensor parallelism stays inside a GPU's scale-up domain
// (catalog.GPU.DomainOf: 8 in an HGX node, 72 in an NVL72 rack), so a
// candidate wider than a domain splits by pipeline stages or data-parallel
// ranks with expert parallelism, which the simulator prices on the
// network they cross (internal/model/sim/network.go). A row whose replica
// spans hosts carries a launch command per host (Row.Hosts).

// withinDomain keeps the tensor-parallel sizes that fit in one of g's
// domains.
func withinDomain(g catalog.GPU, tps []int) []int {
	var out []int
	for _, tp := range tps {
		if tp <= g.DomainOf() {
			out = append(out, tp)
		}
	}
	return out
}

// shapesWithinDomain keeps the MoE layouts whose tensor-parallel groups
// fit in one of g's domains.
func shapesWithinDomain(g catalog.GPU, shapes []shape) []shape {
	var out []shape
	for _, s := range shapes {
		if s.tp <= g.DomainOf() {
			out = append(out, s)
		}
	}
	return out
}

// HostCommand is one host's part of a replica that spans hosts.
type HostCommand struct {
	Rank    int    `json:"rank"` // 0 = the head, which serves HTTP
	GPUs    int    `json:"gpus"`
	Command string `json:"command"`
}

// Placeholders in the per-host commands: the head host's address, which
// the user (or a LeaderWorkerSet's LWS_LEADER_ADDRESS) supplies.
const (
	headAddr      = "$HEAD_IP"
	vllmDPRPCPort = "13345" // vLLM's data-parallel handshake port (any free port)
	rayPort       = "6379"
	sglangInit    = "5000"
)

// hostCommands is the launch of a replica of n GPUs of g as engine e runs
// it on hosts of g.HostSize() GPUs, for the image of the release printed
// commands are for (engine.DefaultImage); nil when it fits on one host.
//
// vLLM: data-parallel ranks of TP x PP GPUs that divide a host start as
// one server across hosts with --data-parallel-size-local, the head's
// --data-parallel-address and --data-parallel-rpc-port, and --headless
// --data-parallel-start-rank on the others; a replica whose TP x PP spans
// hosts runs on a Ray cluster (ray start on each host, then
// --distributed-executor-backend ray on the head), the one multi-host
// executor of every vLLM release from 0.11 on. Expert parallelism across hosts takes DeepEP's low-latency
// all-to-all (VLLM_ALL2ALL_BACKEND). SGLang: the same command on every
// host with --nnodes, --node-rank and --dist-init-addr.
func hostCommands(g catalog.GPU, e engine.Engine, model string, set engine.Settings, n int) []HostCommand {
	host := g.HostSize()
	if n <= host {
		return nil
	}
	hosts := (n + host - 1) / host
	gpusOn := func(k int) int { return min(host, n-k*host) }
	var out []HostCommand
	switch e {
	case engine.SGLang:
		for k := range hosts {
			argv := engine.ServeCommand(e, model, set, []string{"--nnodes", strconv.Itoa(hosts), "--node-rank", strconv.Itoa(k),
				"--dist-init-addr", headAddr + ":" + sglangInit})
			out = append(out, HostCommand{Rank: k, GPUs: gpusOn(k), Command: shellJoinVars(argv)})
		}
	case engine.VLLM:
		tp, _ := set.Int("tensor_parallel")
		pp, _ := set.Int("pipeline_parallel")
		dp, _ := set.Int("data_parallel")
		rank := max(tp, 1) * max(pp, 1)
		ep, _ := set.Bool("expert_parallel")
		env := ""
		if ep {
			env = "VLLM_ALL2ALL_BACKEND=deepep_low_latency "
		}
		if rank <= host && host%rank == 0 && max(dp, 1)*rank == n {
			local := host / rank
			for k := range hosts {
				extra := []string{"--data-parallel-size-local", strconv.Itoa(gpusOn(k) / rank),
					"--data-parallel-address", headAddr, "--data-parallel-rpc-port", vllmDPRPCPort}
				if k > 0 {
					extra = append(extra, "--headless", "--data-parallel-start-rank", strconv.Itoa(k*local))
				}
				out = append(out, HostCommand{Rank: k, GPUs: gpusOn(k), Command: env + shellJoinVars(engine.ServeCommand(e, model, set, extra))})
			}
			return out
		}
		extra := []string{"--distributed-executor-backend", "ray"}
		if dp > 1 {
			extra = append(extra, "--data-parallel-backend", "ray")
		}
		head := fmt.Sprintf("ray start --head --port=%s && %s%s", rayPort, env, shellJoinVars(engine.ServeCommand(e, model, set, extra)))
		out = append(out, HostCommand{Rank: 0, GPUs: gpusOn(0), Command: head})
		for k := 1; k < hosts; k++ {
			out = append(out, HostCommand{Rank: k, GPUs: gpusOn(k), Command: fmt.Sprintf(`ray start --address="%s":%s --block`, headAddr, rayPort)})
		}
	}
	return out
}

// shellJoinVars quotes argv for a POSIX shell as engine.ShellJoin does,
// leaving the head-address placeholder for the shell to expand.
func shellJoinVars(argv []string) string {
	out := ""
	for i, a := range argv {
		if i > 0 {
			out += " "
		}
		switch {
		case a == headAddr:
			out += `"` + headAddr + `"`
		case len(a) > len(headAddr) && a[:len(headAddr)] == headAddr:
			out += `"` + headAddr + `"` + engine.ShellJoin([]string{a[len(headAddr):]})
		default:
			out += engine.ShellJoin([]string{a})
		}
	}
	return out
}

// addHostCommands sets Hosts on each aggregated row whose replica spans
// hosts.
func addHostCommands(o Options, cands []candidate, rows []Row) {
	model := o.Model
	if dir, _, ok := catalog.ModelPath(o.Model); ok {
		model = dir
	}
	for i := range rows {
		if i >= len(cands) || cands[i].disagg || rows[i].Settings == nil {
			continue
		}
		rows[i].Hosts = hostCommands(cands[i].gpu, cands[i].engine, model, rows[i].Settings, cands[i].n)
	}
}

// maxReplicaGPUs is the most GPUs one replica may span: an NVL72 rack.
const maxReplicaGPUs = 72

// replicaSizes are the aggregated candidates' GPUs per replica: powers of
// two up to MaxGPUs and, for an MoE model, MaxGPUs itself where it is a
// multiple of 8 but not a power of two (72: a whole NVL72 rack, split
// into data-parallel ranks of 1 to 8 GPUs with the experts over all).
func replicaSizes(o Options, m catalog.Model) []int {
	if !o.wants(ShapeAggregated) {
		return nil
	}
	var out []int
	for n := 1; n <= o.MaxGPUs; n *= 2 {
		out = append(out, n)
	}
	if n := o.MaxGPUs; m.MoE() && n%8 == 0 && n&(n-1) != 0 {
		out = append(out, n)
	}
	return out
}
