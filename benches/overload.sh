#!/usr/bin/env bash
# Overload: rolling-deploy's chain (5 proxies, 5 providers, in-process registry) in
# steady state (`--rounds 0`) offered more than it can serve, with the adaptive
# concurrency limit (`provider.limit`, on every proxy and provider) off and on.
#
#   bash benches/overload.sh [HEALTHY [DURATION [FACTORS...]]]   (defaults: 7500 30s 1.1 1.5)
#
# 1. reference: 5 000 req/s, limit off: the steady p99 the targets are measured against.
# 2. for each factor × HEALTHY (8 250 and 11 250 req/s by default), limit off then on.
# Prints one line per run: offered rate, goodput (successful req/s over the sending
# time), failed by status, p99 of the successful calls and its ratio to the reference
# p99. Issue 16's targets: goodput ≥ 0.9 × HEALTHY, the excess refused fast as
# RESOURCE_EXHAUSTED, p99 of successes ≤ 5 × the reference.
set -euo pipefail
cd "$(dirname "$0")/.."

healthy=${1:-7500}
duration=${2:-30s}
shift $(($# < 2 ? $# : 2))
factors=("$@")
[[ ${#factors[@]} -gt 0 ]] || factors=(1.1 1.5)
cargo build --release --bin rolling-deploy >&2
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT

seconds=$(python3 -c '
import re, sys
m = re.fullmatch(r"(\d+)(ms|s|m)", sys.argv[1])
n, unit = int(m[1]), m[2]
print(n / 1000 if unit == "ms" else n * 60 if unit == "m" else n)' "$duration")

# run RATE LIMIT: one steady run; prints its line and sets p99 (of the successes).
run() {
    ./target/release/rolling-deploy --quiet --rate "$1" --rounds 0 --duration "$duration" \
        --limit "$2" --json "$summary" >/dev/null || true
    local out
    out=$(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
rate, limit, healthy, reference = int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5]
goodput = s["succeeded"] / float(sys.argv[6])
p99 = s["latency_succeeded_ms"]["p99"]
ratio = "-" if reference == "-" else f"{p99 / float(reference):.1f}x"
codes = ",".join(f"{k}={v}" for k, v in sorted(s["failed_by_code"].items())) or "none"
failed = s["failed"]
print(f"{rate:>7} {limit:>5} {goodput:>9.0f} {goodput / healthy:>8.2f} {failed:>8} "
      f"{p99:>9.2f} {ratio:>6}  {codes} {p99}")
' "$summary" "$1" "$2" "$healthy" "${reference_p99:--}" "$seconds")
    p99=${out##* }
    echo "${out% *}"
}

printf '%7s %5s %9s %6s %8s %9s %6s  %s\n' rate limit goodput xhealthy failed p99_ok_ms xref \
    failed_by_code
reference_p99=
run 5000 off
reference_p99=$p99
for factor in "${factors[@]}"; do
    rate=$(python3 -c "print(round($healthy * $factor))")
    for limit in off on; do
        run "$rate" "$limit"
    done
done
echo "overload: reference p99 of successes at 5000 req/s: $reference_p99 ms (duration $duration, healthy rate $healthy req/s)"
