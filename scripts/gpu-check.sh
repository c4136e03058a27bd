#!/bin/sh
# gpu-check.sh: check servetune's GPU telemetry on a machine with an NVIDIA
# GPU. It loads GPU 0 for a while and prints what NVML saw meanwhile
# (`servetune gpus --watch`): utilisation, memory, power, temperature, SM
# clock, and each GPU's energy over the window.
#
#   scripts/gpu-check.sh [SECONDS]        (default 20)
#
# The load: PyTorch matrix multiplications where python3 has torch with
# CUDA; without it the GPU is sampled idle (nothing here needs CUDA), which
# still checks that NVML is read, but not that load shows. On a host without
# a driver it prints one line saying so and exits 0: there is nothing to
# check. Exit 1 when the telemetry is wrong under load (no utilisation, no
# energy).
set -eu
secs=${1:-20}
case $secs in *[!0-9]* | '') echo "gpu-check: SECONDS must be a whole number, got '$secs'" >&2; exit 2 ;; esac
cd "$(dirname "$0")/.."
bin=${SERVETUNE:-bin/servetune}
if [ ! -x "$bin" ]; then
	${GO:-go} build -o "$bin" ./cmd/servetune
fi

if ! out=$("$bin" gpus 2>&1); then
	echo "gpu-check: servetune gpus failed: $out" >&2
	exit 1
fi
case $out in
"no GPU telemetry"*)
	echo "gpu-check: SKIPPED: $out"
	exit 0
	;;
esac
echo "$out"

load=none
pid=
if command -v python3 >/dev/null 2>&1 && python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
	load=torch
	python3 - "$secs" <<'PY' &
import sys, time, torch
end = time.time() + float(sys.argv[1])
a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
while time.time() < end:
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize()
PY
	pid=$!
	sleep 2 # the context and the first kernels start
else
	echo "gpu-check: no python3 with CUDA torch here: sampling the GPUs without load"
fi

report=$("$bin" gpus --watch "${secs}s" --interval 1s)
[ -n "$pid" ] && wait "$pid" || true
echo "$report"

if [ "$load" = torch ]; then
	# Under matmuls GPU 0 must report work and energy.
	line=$(echo "$report" | grep '^gpu 0 ' || true)
	util=$(echo "$line" | sed -n 's/.*mean util \([0-9]*\)%.*/\1/p')
	energy=$(echo "$line" | sed -n 's/.*energy \([0-9]*\) J.*/\1/p')
	if [ -z "$util" ] || [ "$util" -lt 50 ] || [ -z "$energy" ] || [ "$energy" -le 0 ]; then
		echo "gpu-check: FAIL: under load GPU 0 reported mean util '${util:-?}'% and energy '${energy:-?}' J" >&2
		exit 1
	fi
	echo "gpu-check: OK: GPU 0 under load: mean util ${util}%, energy ${energy} J"
else
	echo "gpu-check: OK: NVML read (no load applied)"
fi
