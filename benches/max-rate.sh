#!/usr/bin/env bash
# Finds the highest request rate at which this machine keeps 0 failed requests through a
# full roll of rolling-deploy (defaults: 5 proxies, 5 providers, in-process registry).
#
#   bash benches/max-rate.sh [START [STEP [DURATION]]]     (defaults: 5000 2500 30s)
#
# Runs rolling-deploy at START, START+STEP, ... until a run fails a request, misses a
# restart, or achieves less than 98 % of the requested rate; prints one line per run
# (rate, failed, p99 steady / during restarts) and the highest clean rate.
set -euo pipefail
cd "$(dirname "$0")/.."

start=${1:-5000}
step=${2:-2500}
duration=${3:-30s}
cargo build --release --bin rolling-deploy >&2
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT

best=0
rate=$start
printf '%8s %10s %8s %12s %12s %8s\n' rate achieved failed p99_steady p99_roll restarts
while :; do
    ./target/release/rolling-deploy --quiet --rate "$rate" --duration "$duration" --json "$summary" >/dev/null || true
    read -r achieved failed steady roll restarts planned < <(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
print(round(s["achieved_rate"]), s["failed"], s["latency_steady_ms"]["p99"], s["latency_during_restarts_ms"]["p99"], s["restarts"], s["restarts_planned"])
' "$summary")
    printf '%8s %10s %8s %12s %12s %8s\n' "$rate" "$achieved" "$failed" "$steady" "$roll" "$restarts/$planned"
    if [[ $failed -ne 0 || $restarts -ne $planned ]] || ((achieved * 100 < rate * 98)); then
        break
    fi
    best=$rate
    rate=$((rate + step))
done
echo "max-rate: highest rate with 0 failed through a full roll: $best req/s (duration $duration)"
