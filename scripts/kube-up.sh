#!/usr/bin/env bash
# Start a one-node Kubernetes cluster on this machine for the kubernetes
# launcher's tests and examples/kube-sim.yaml: etcd (Debian's etcd-server),
# kube-apiserver, kube-controller-manager and kube-scheduler built from
# k8s.io/kubernetes (KUBE_VERSION, from the Go module proxy), and a node:
# internal/testengine/kubenode, a stand-in that runs each bound pod's
# container on the local Docker Engine (a real kubelet needs a container
# runtime and cgroups this sandbox lacks; see README, Kubernetes).
#
# Idempotent: binaries, certificates and the kubeconfig are built once
# under KUBE_HOME (default ~/.cache/servetune-kube) and reused; a cluster
# whose node is Ready is left alone; otherwise the daemons this script
# started are stopped (by their pid files) and started again.
#
# The first run's time is the compile (~2,200 packages; measured on this
# 2-core machine shared with other builds: modules 14 s, compile 16.4 min
# at load 12-16, 11.1 min at load 6, 8.0 min at load 2-6 (CGO_ENABLED=0); about 11 CPU-minutes, so
# about 5.5 min on two idle cores; README, Kubernetes). KUBE_BUILD_TRACE=FILE
# writes the compile's per-package timings (go build -debug-trace) there.
# The kube build has its own GOCACHE ($KUBE_GOCACHE, default
# $KUBE_HOME/gocache), which can be removed without touching others'.
#
# Needs: Go, Docker, openssl, and root for apt-get when etcd or kubectl
# is missing. Prints "kube: up (...)" and exits 0, or names what failed
# and exits 1. KUBECONFIG for the cluster: $KUBE_HOME/kubeconfig (also
# written to ~/.kube/config when there is none).
set -euo pipefail

version=${KUBE_VERSION:-v1.37.2}
home=${KUBE_HOME:-$HOME/.cache/servetune-kube}
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=$home/bin/$version
pki=$home/pki
run=$home/run
logs=$home/log
kubeconfig=$home/kubeconfig
node=${KUBE_NODE:-servetune-node}
gpus=${KUBE_NODE_GPUS:-4}
apiport=${KUBE_API_PORT:-6443}
etcdport=${KUBE_ETCD_PORT:-23790}
nodeport=${KUBE_NODE_PORT:-10250}
start=$(date +%s)

die() { echo "kube-up: $*" >&2; exit 1; }
say() { echo "kube-up: $*" >&2; }
mkdir -p "$bin" "$pki" "$run" "$logs"

kctl() { kubectl --kubeconfig "$kubeconfig" --request-timeout=5s "$@"; }
ready() {
	[ -s "$kubeconfig" ] && kctl get node "$node" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null | grep -qx True
}

# ours PIDFILE PROGRAM: the pid file names a live PROGRAM (scripts/pidfile.sh).
. "$repo/scripts/pidfile.sh"
ours() { pidfile_ours "$1" "$2"; }

# 0. Up already: leave it alone.
if command -v kubectl >/dev/null && ready && ours "$run/kubenode.pid" kubenode; then
	echo "kube: up (already running; node $node Ready; KUBECONFIG=$kubeconfig)"
	exit 0
fi

# 1. Packages: etcd and kubectl from Debian, only what is missing (a
# kubectl from another package, such as Google's, owns /usr/bin/kubectl and
# makes kubernetes-client fail to unpack).
pkgs=()
command -v etcd >/dev/null || pkgs+=(etcd-server)
command -v kubectl >/dev/null || pkgs+=(kubernetes-client)
if [ ${#pkgs[@]} -gt 0 ]; then
	[ "$(id -u)" = 0 ] || die "${pkgs[*]} missing: run as root to apt-get install ${pkgs[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null || die "apt-get install ${pkgs[*]} failed"
fi
command -v openssl >/dev/null || die "openssl is missing"
docker info >/dev/null 2>&1 || die "the Docker Engine does not answer (docker info): the node runs pods on it"

# 2. The control plane's binaries, built once per version from the module
# proxy. `go install k8s.io/kubernetes/cmd/...@v` is refused (its go.mod
# replaces the staging modules with directories), so a throwaway module
# requires k8s.io/kubernetes and points each staging module at its
# published release (v1.X.Y is v0.X.Y). One go build for the three (2,222
# packages; the controller manager alone needs 2,208); CGO_ENABLED=0 (static
# binaries, no cgo steps); -s (no symbol table or DWARF) shortens the
# links. No build tag drops code in v1.37 (no providerless since the cloud
# providers left the tree), and kube-controller-manager's own packages are
# 11% of the compile: it stays whole, since the launcher's Deployments
# need its deployment and replicaset controllers.
if [ ! -x "$bin/kube-apiserver" ] || [ ! -x "$bin/kube-controller-manager" ] || [ ! -x "$bin/kube-scheduler" ]; then
	say "building kube-apiserver, kube-controller-manager and kube-scheduler $version (once; takes many minutes)"
	src=$home/src-$version
	mkdir -p "$src"
	staging="v0.${version#v1.}"
	( cd "$src"
	  export GOCACHE=${KUBE_GOCACHE:-$home/gocache}
	  t0=$(date +%s)
	  go mod download k8s.io/kubernetes@"$version"
	  kmod=$(go env GOMODCACHE)/k8s.io/kubernetes@$version/go.mod
	  { printf 'module servetunekube\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$version"
	    sed -n '/^replace (/,/^)/p' "$kmod" | awk -v v="$staging" '/=>/ {print "\t" $1 " => " $1 " " v}'
	    printf ')\n'; } >go.mod
	  printf '//go:build tools\n\npackage tools\n\nimport (\n\t_ "k8s.io/kubernetes/cmd/kube-apiserver"\n\t_ "k8s.io/kubernetes/cmd/kube-controller-manager"\n\t_ "k8s.io/kubernetes/cmd/kube-scheduler"\n)\n' >tools.go
	  go mod tidy -e >/dev/null 2>&1
	  t1=$(date +%s)
	  say "modules downloaded in $((t1 - t0))s"
	  CGO_ENABLED=0 go build ${KUBE_BUILD_TRACE:+-debug-trace="$KUBE_BUILD_TRACE"} -tags tools -trimpath -ldflags=-s -o "$bin/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler
	  say "compiled in $(( $(date +%s) - t1 ))s"
	) || die "building the control plane failed"
fi
say "building the node (internal/testengine/kubenode)"
( cd "$repo" && go build -o "$home/bin/kubenode" ./internal/testengine/kubenode ) || die "building internal/testengine/kubenode failed"

# 3. Certificates: a CA, the API server's serving certificate, an admin
# client (system:masters) the controllers, the node and the tests use, and
# the service-account key.
if [ ! -s "$pki/admin.crt" ]; then
	say "writing certificates under $pki"
	( cd "$pki"
	  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj "/CN=servetune-kube-ca" 2>/dev/null
	  cat >san.cnf <<-EOF
	[req]
	distinguished_name = dn
	[dn]
	[ext]
	subjectAltName = DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:127.0.0.1,IP:10.0.0.1
	extendedKeyUsage = serverAuth
	EOF
	  openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr -subj "/CN=kube-apiserver" 2>/dev/null
	  openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out apiserver.crt -days 3650 -extfile san.cnf -extensions ext 2>/dev/null
	  printf '[ext]\nextendedKeyUsage = clientAuth\n' >client.cnf
	  openssl req -newkey rsa:2048 -nodes -keyout admin.key -out admin.csr -subj "/O=system:masters/CN=servetune-admin" 2>/dev/null
	  openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out admin.crt -days 3650 -extfile client.cnf -extensions ext 2>/dev/null
	  openssl genrsa -out sa.key 2048 2>/dev/null
	  openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
	) || die "openssl failed"
fi
cat >"$kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: servetune
  cluster:
    server: https://127.0.0.1:$apiport
    certificate-authority: $pki/ca.crt
users:
- name: admin
  user:
    client-certificate: $pki/admin.crt
    client-key: $pki/admin.key
contexts:
- name: servetune
  context: {cluster: servetune, user: admin}
current-context: servetune
EOF
if [ ! -e "$HOME/.kube/config" ]; then
	mkdir -p "$HOME/.kube" && cp "$kubeconfig" "$HOME/.kube/config"
fi

# 4. The daemons, each stopped first by its pid file if an earlier run
# left it.
daemon() { # name command...
	local name=$1; shift
	if ours "$run/$name.pid" "$name"; then
		kill "$(cat "$run/$name.pid")" 2>/dev/null || true
		for _ in $(seq 50); do ours "$run/$name.pid" "$name" || break; sleep 0.2; done
		ours "$run/$name.pid" "$name" && kill -9 "$(cat "$run/$name.pid")" 2>/dev/null || true
	fi
	setsid nohup "$@" >"$logs/$name.log" 2>&1 </dev/null &
	echo $! >"$run/$name.pid"
}
for name in kubenode kube-scheduler kube-controller-manager kube-apiserver; do
	if ours "$run/$name.pid" "$name"; then kill "$(cat "$run/$name.pid")" 2>/dev/null || true; fi
	rm -f "$run/$name.pid"
done
if ! curl -fsS "http://127.0.0.1:$etcdport/health" 2>/dev/null | grep -q true; then
	daemon etcd etcd --name servetune --data-dir "$home/etcd" \
		--listen-client-urls "http://127.0.0.1:$etcdport" --advertise-client-urls "http://127.0.0.1:$etcdport" \
		--listen-peer-urls "http://127.0.0.1:$((etcdport + 10))" --initial-advertise-peer-urls "http://127.0.0.1:$((etcdport + 10))" \
		--initial-cluster "servetune=http://127.0.0.1:$((etcdport + 10))"
	for _ in $(seq 100); do curl -fsS "http://127.0.0.1:$etcdport/health" 2>/dev/null | grep -q true && break; sleep 0.2; done
	curl -fsS "http://127.0.0.1:$etcdport/health" 2>/dev/null | grep -q true || die "etcd did not start (see $logs/etcd.log)"
fi
daemon kube-apiserver "$bin/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcdport" \
	--secure-port "$apiport" --cert-dir "$pki" --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
	--client-ca-file "$pki/ca.crt" --authorization-mode RBAC \
	--service-account-issuer https://kubernetes.default.svc --service-account-key-file "$pki/sa.pub" \
	--service-account-signing-key-file "$pki/sa.key" --service-cluster-ip-range 10.0.0.0/24 \
	--kubelet-client-certificate "$pki/admin.crt" --kubelet-client-key "$pki/admin.key" \
	--kubelet-preferred-address-types InternalIP
for _ in $(seq 300); do kctl get --raw /readyz >/dev/null 2>&1 && break; sleep 0.5; done
kctl get --raw /readyz >/dev/null 2>&1 || die "kube-apiserver is not ready after 150 s (see $logs/kube-apiserver.log)"
daemon kube-controller-manager "$bin/kube-controller-manager" --kubeconfig "$kubeconfig" --leader-elect=false \
	--service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" --use-service-account-credentials=false
daemon kube-scheduler "$bin/kube-scheduler" --kubeconfig "$kubeconfig" --leader-elect=false
daemon kubenode "$home/bin/kubenode" --kubeconfig "$kubeconfig" --name "$node" --gpus "$gpus" --port "$nodeport"
for _ in $(seq 120); do ready && break; sleep 0.5; done
ready || die "node $node is not Ready after 60 s (see $logs/kubenode.log)"
echo "kube: up in $(( $(date +%s) - start ))s (node $node Ready with $gpus nvidia.com/gpu; KUBECONFIG=$kubeconfig; logs in $logs)"
