package main

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/servetune/servetune/internal/model/sim"
	"github.com/spf13/cobra"
)

// routerArgs are `sim router`'s flags: vLLM's toy proxy's, whose host and
// port lists take several values each (`--prefiller-hosts h1 h2`).
type routerArgs struct {
	host                      string
	port                      int
	prefillHosts, decodeHosts []string
	prefillPorts, decodePorts []int
}

// routerHost and routerPort are where `sim router` listens by default.
const (
	routerHost = "127.0.0.1"
	routerPort = 8000
)

// routerFlags are `sim router`'s flags, for its help and its refusal of
// others; each list flag is also taken in the singular (--prefiller-host).
var routerFlags = []struct{ name, value, usage string }{
	{"--host", "HOST", "address to listen on (default " + routerHost + ")"},
	{"--port", "PORT", "port to listen on (default " + strconv.Itoa(routerPort) + ")"},
	{"--prefiller-hosts", "HOST [HOST..]", "the prefill engines' hosts, one per engine"},
	{"--prefiller-ports", "PORT [PORT..]", "the prefill engines' ports, one per host"},
	{"--decoder-hosts", "HOST [HOST..]", "the decode engines' hosts, one per engine"},
	{"--decoder-ports", "PORT [PORT..]", "the decode engines' ports, one per host"},
}

// routerFlagsHelp lists routerFlags as cobra lists a command's flags.
func routerFlagsHelp() string {
	var b strings.Builder
	for _, f := range routerFlags {
		fmt.Fprintf(&b, "  %-32s %s\n", f.name+" "+f.value, f.usage)
	}
	return b.String()
}

// parseRouterArgs reads args; a list flag takes the values up to the next
// flag. Errors are one line naming the flag.
func parseRouterArgs(args []string) (routerArgs, error) {
	a := routerArgs{host: routerHost, port: routerPort}
	for i := 0; i < len(args); i++ {
		name, val, hasVal := strings.Cut(args[i], "=")
		var vals []string
		if hasVal {
			vals = []string{val}
		} else {
			for i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
				i++
				vals = append(vals, args[i])
			}
		}
		if len(vals) == 0 {
			return a, fmt.Errorf("%s: expected a value", name)
		}
		one := func() (string, error) {
			if len(vals) != 1 {
				return "", fmt.Errorf("%s: expected one value, got %d", name, len(vals))
			}
			return vals[0], nil
		}
		ports := func() ([]int, error) {
			var out []int
			for _, v := range vals {
				p, err := strconv.Atoi(v)
				if err != nil {
					return nil, fmt.Errorf("%s: %q is not a port", name, v)
				}
				out = append(out, p)
			}
			return out, nil
		}
		var err error
		switch name {
		case "--host":
			a.host, err = one()
		case "--port":
			var v string
			if v, err = one(); err == nil {
				if a.port, err = strconv.Atoi(v); err != nil || a.port < 0 || a.port > 65535 {
					err = fmt.Errorf("--port: %q is not a port", v)
				}
			}
		case "--prefiller-hosts", "--prefiller-host":
			a.prefillHosts = append(a.prefillHosts, vals...)
		case "--decoder-hosts", "--decoder-host":
			a.decodeHosts = append(a.decodeHosts, vals...)
		case "--prefiller-ports", "--prefiller-port":
			var p []int
			p, err = ports()
			a.prefillPorts = append(a.prefillPorts, p...)
		case "--decoder-ports", "--decoder-port":
			var p []int
			p, err = ports()
			a.decodePorts = append(a.decodePorts, p...)
		default:
			names := make([]string, len(routerFlags))
			for i, f := range routerFlags {
				names[i] = f.name
			}
			err = fmt.Errorf("unknown flag %s (want %s)", name, strings.Join(names, ", "))
		}
		if err != nil {
			return a, err
		}
	}
	return a, nil
}

func newSimRouterCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "router --port P --prefiller-hosts H [H..] --prefiller-ports P [P..] --decoder-hosts H [H..] --decoder-ports P [P..]",
		Short: "A stand-in for a disaggregated deployment's router: prefill on one engine, decode on another (vLLM's toy proxy's flags and handshake)",
		Long: `A stand-in for a disaggregated deployment's router, with the flags of vLLM's
NixlConnector toy proxy. Each completion goes to a prefill engine (round-robin)
with kv_transfer_params {"do_remote_decode": true} and one token, then with the
kv_transfer_params it answered to a decode engine (round-robin), whose answer
streams back unchanged. /health is 200 when every engine's is; /v1/models
passes through. Real deployments run vLLM's router, a package of its own that
sends the engines the same requests (pip install vllm-router; vllm-router
--vllm-pd-disaggregation --prefill URL --decode URL), or SGLang's (python3 -m
sglang_router.launch_router --pd-disaggregation --prefill URL --decode URL);
servetune recommend prints theirs in place of this one.

Router flags:
` + routerFlagsHelp(),
		Example:            "  servetune sim router --port 8000 --prefiller-hosts 127.0.0.1 --prefiller-ports 8100 --decoder-hosts 127.0.0.1 --decoder-ports 8200",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if wantsHelp(args) {
				return cmd.Help()
			}
			a, err := parseRouterArgs(args)
			if err != nil {
				return usageError(err)
			}
			r, err := sim.NewRouter(a.prefillHosts, a.prefillPorts, a.decodeHosts, a.decodePorts)
			if err != nil {
				return usageError(err)
			}
			log := cmd.ErrOrStderr()
			addr := net.JoinHostPort(a.host, strconv.Itoa(a.port))
			err = r.ListenAndServe(cmd.Context(), addr, func(ad net.Addr) {
				fmt.Fprintf(log, "INFO servetune-sim router on http://%s: prefill %d, decode %d engines\n", ad, len(a.prefillHosts), len(a.decodeHosts))
			})
			if err != nil {
				return failedError(err)
			}
			return nil
		},
	}
}
