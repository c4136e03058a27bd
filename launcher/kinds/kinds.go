// Package kinds registers every launcher kind: import it for its side
// effect where studies are parsed (the servetune command does). The kinds
// of package launcher itself (process, endpoint) register with it; each
// other kind is one import line here.
package kinds

import (
	_ "github.com/servetune/servetune/launcher/docker"     // docker
	_ "github.com/servetune/servetune/launcher/kubernetes" // kubernetes
	_ "github.com/servetune/servetune/launcher/simulated"  // sim, virtual
	_ "github.com/servetune/servetune/launcher/slurm"      // slurm
)
