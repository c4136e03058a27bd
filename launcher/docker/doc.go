// Package docker is the docker launcher kind: each trial's engine is a
// container on a Docker host (the local daemon, DOCKER_HOST, or
// unix://, tcp://, ssh://[user@]host[:port] as the docker CLI takes them),
// started as the engines' documentation deploys them (the GPUs by index,
// the host's IPC namespace, the port on 127.0.0.1 unless Address names a
// remote host), labelled by launcher.Label (servetune.io/study,
// servetune.io/trial, ...), and removed by Stop. Hosts spreads one study over
// several Docker hosts (launcher.hosts) and reaps a study's leftovers on
// each of them (Reap). The image servetune-sim:dev is the simulated engine
// and gets no GPU. Images are never pulled: a missing one is
// ErrImageMissing.
//
// The Docker SDK is used through interfaces of a few methods each, declared
// where they are used. The API version is negotiated, so daemons as old as
// Engine 20.10 work. A Docker launcher is safe for concurrent Launch calls.
package docker
