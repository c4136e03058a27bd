#!/usr/bin/env bash
# make soak: servetune bench against servetune sim serve for SOAK_MINUTES
# minutes (default 10) at SOAK_RATE requests/s (default 20), as one bench
# process running one-minute levels. Both processes print their RSS, heap,
# goroutines and open files every minute (SERVETUNE_SELF_STATS); the script
# prints them side by side and says whether they stayed flat: after the
# first minute, goroutines and open files within 10% + 5 and RSS within 25%.
# The summaries go to CSV: --json would keep every request's latencies of
# every level for the file, memory that grows by design.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/servetune}
MINUTES=${SOAK_MINUTES:-10}
RATE=${SOAK_RATE:-20}
INTERVAL=${SOAK_INTERVAL:-1m}
LEVEL=${SOAK_LEVEL:-60s}
work=$(mktemp -d)
trap 'kill "$simpid" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT

SERVETUNE_SELF_STATS=$INTERVAL "$BIN" sim serve meta-llama/Llama-3.1-8B-Instruct --port 0 \
  --host 127.0.0.1 --sim-load-time 0s --max-num-seqs 256 >"$work/sim.out" 2>"$work/sim.err" &
simpid=$!
url=""
for _ in $(seq 1 100); do
  url=$(grep -o 'http://[0-9.]*:[0-9]*' "$work/sim.err" | head -1 || true)
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { echo "soak: sim serve did not start:"; cat "$work/sim.err"; exit 1; }
echo "soak: ${MINUTES} min at ${RATE} req/s against $url (levels of $LEVEL)"

rates=$RATE
for _ in $(seq 2 "$MINUTES"); do rates="$rates,$RATE"; done
SERVETUNE_SELF_STATS=$INTERVAL "$BIN" bench --base-url "$url" --model meta-llama/Llama-3.1-8B-Instruct \
  --input-len 512 --output-len 128 --sweep "rate=$rates" --duration "$LEVEL" --max-concurrency 256 \
  --no-progress --csv "$work/soak.csv" --requests-out /dev/null >"$work/bench.out" 2>"$work/bench.err" || {
  echo "soak: bench failed:"; tail -5 "$work/bench.err"; exit 1; }
kill -INT "$simpid"; wait "$simpid" 2>/dev/null || true

grep -h '^selfstats' "$work/bench.err" "$work/sim.err"
grep -h 'Successful requests\|Failed requests' "$work/bench.out" | sort | uniq -c
awk '
/^selfstats/ {
  who=$2; n[who]++
  for (i = 4; i <= NF; i++) { split($i, kv, "="); v = kv[2]; sub(/MB$/, "", v); val[who, n[who], kv[1]] = v }
}
END {
  ok = 1
  for (who in n) {
    if (n[who] < 4) { printf "soak: %s: only %d samples\n", who, n[who]; ok = 0; continue }
    # the first sample under load and the last one under load (the very
    # last is taken after the load stopped)
    a = 2; b = n[who] - 1
    split("rss goroutines open_files", keys, " ")
    line = who ":"
    for (k = 1; k <= 3; k++) {
      key = keys[k]; x = val[who, a, key]; y = val[who, b, key]
      line = line sprintf(" %s %s -> %s", key, x, y)
      if (key == "rss" && y > x * 1.25 + 5) ok = 0
      if (key != "rss" && y > x * 1.10 + 5) ok = 0
    }
    print "soak: " line
  }
  if (ok) print "soak: flat"; else { print "soak: GROWING"; exit 1 }
}' "$work/bench.err" "$work/sim.err"
