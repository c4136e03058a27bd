#!/bin/sh
# Build the servetune-sim Docker image: a static servetune binary in an image
# FROM scratch whose entry point is `servetune sim serve`. Used by
# `make sim-image` and by the launcher's Docker tests.
#
# Environment: SIM_IMAGE (default servetune-sim:dev), GO (default go).
# The image is rebuilt only when the binary or Dockerfile changed (label servetune.binary).
set -eu

image=${SIM_IMAGE:-servetune-sim:dev}
go=${GO:-go}
root=$(cd "$(dirname "$0")/.." && pwd)
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT

cd "$root"
# go-sqlite3 and go-nvml compile to stubs without cgo: the sim needs neither.
CGO_ENABLED=0 "$go" build -trimpath -tags netgo,osusergo -ldflags "-s -w" -o "$ctx/servetune" ./cmd/servetune
cp scripts/sim.Dockerfile "$ctx/Dockerfile"
# The label covers the binary and the Dockerfile: either changing rebuilds.
sum=$(cat "$ctx/servetune" "$ctx/Dockerfile" | sha256sum | cut -c1-16)

have=$(docker image inspect --format '{{ index .Config.Labels "servetune.binary" }}' "$image" 2>/dev/null || true)
if [ "$have" = "$sum" ]; then
	echo "$image is up to date (binary $sum)"
	exit 0
fi

old=$(docker image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)
# The legacy builder: BuildKit may be absent, and FROM scratch needs nothing it adds.
DOCKER_BUILDKIT=0 docker build -q --label "servetune.binary=$sum" -t "$image" "$ctx" >/dev/null
# Drop the image this one replaces, unless a container still uses it.
[ -n "$old" ] && docker image rm "$old" >/dev/null 2>&1 || true
echo "built $image (binary $sum)"
