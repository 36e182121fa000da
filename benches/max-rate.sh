#!/usr/bin/env bash
# The cost of a roll in capacity: the highest request rate this machine holds in steady
# state, and the highest it holds through a full roll of rolling-deploy (defaults: 5
# proxies, 5 providers, in-process registry), in one run of this script.
#
#   bash benches/max-rate.sh [START [STEP [DURATION]]]     (defaults: 5000 2500 30s)
#
# 1. reference: `--rounds 0` (no restart) at 5 000 req/s; its p99 is the latency bound.
# 2. steady: `--rounds 0` at START, START+STEP, ... until a run fails a request, achieves
#    less than 98 % of the requested rate, or has a p99 above 3× the reference p99.
# 3. roll: a full roll (`--rounds 1`) at the same rates, until the same, or a restart
#    is missed.
# Prints one line per run (rate, failed, p99 of the whole run / steady / during
# restarts), then the highest healthy rate of each pass and their ratio (issue 16 asks
# roll / steady ≥ 0.9).
set -euo pipefail
cd "$(dirname "$0")/.."

start=${1:-5000}
step=${2:-2500}
duration=${3:-30s}
reference_rate=5000
cargo build --release --bin rolling-deploy >&2
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT

# run RATE ROUNDS: one rolling-deploy run; sets achieved failed p99 steady roll restarts
# planned and prints its line.
run() {
    ./target/release/rolling-deploy --quiet --rate "$1" --rounds "$2" --duration "$duration" \
        --json "$summary" >/dev/null || true
    read -r achieved failed p99 steady roll restarts planned < <(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
print(round(s["achieved_rate"]), s["failed"], s["latency_ms"]["p99"], s["latency_steady_ms"]["p99"],
      s["latency_during_restarts_ms"]["p99"], s["restarts"], s["restarts_planned"])
' "$summary")
    printf '%8s %7s %10s %8s %10s %12s %12s %8s\n' "$3" "$1" "$achieved" "$failed" "$p99" \
        "$steady" "$roll" "$restarts/$planned"
}

# healthy RATE: whether the last run kept 0 failed, every restart, 98 % of the rate and
# a p99 within 3× the reference.
healthy() {
    [[ $failed -eq 0 && $restarts -eq $planned ]] && ((achieved * 100 >= $1 * 98)) &&
        python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) <= 3 * float(sys.argv[2]) else 1)' \
            "$p99" "$reference_p99"
}

printf '%8s %7s %10s %8s %10s %12s %12s %8s\n' pass rate achieved failed p99 p99_steady \
    p99_roll restarts
run "$reference_rate" 0 reference
reference_p99=$p99

best=()
for rounds in 0 1; do
    pass=$([[ $rounds -eq 0 ]] && echo steady || echo roll)
    highest=0
    rate=$start
    while :; do
        run "$rate" "$rounds" "$pass"
        healthy "$rate" || break
        highest=$rate
        rate=$((rate + step))
    done
    best+=("$highest")
done
echo "max-rate: reference p99 at $reference_rate req/s: $reference_p99 ms; bound 3× (duration $duration)"
echo "max-rate: highest healthy rate in steady state (no restart): ${best[0]} req/s"
echo "max-rate: highest healthy rate through a full roll: ${best[1]} req/s"
python3 -c 'import sys; s, r = map(int, sys.argv[1:]); print(f"max-rate: roll/steady={r / s:.3f}" if s else "max-rate: roll/steady=n/a")' \
    "${best[0]}" "${best[1]}"
