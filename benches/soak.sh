#!/usr/bin/env bash
# Soak (issue 12, rule 10): one rolling-deploy run that rolls every instance again and
# again for a long time (default 10 minutes), watched from outside: its resident memory
# and open file descriptors are sampled every few seconds from /proc.
#
#   bash benches/soak.sh [DURATION_S [RATE [EXTRA rolling-deploy ARGS...]]]
#                                           (defaults: 600 s, 5000 req/s)
#
# The number of rounds is as many as fit in the duration (rolling-deploy refuses a run
# too short for its restarts, so this asks for the most that fit). It passes when the run
# failed 0 requests and made every planned restart, resident memory at the end is at most
# 1.2 × what it was after the first minute, and the open fds at the end are at most the
# fds after the first minute plus a small slack (connections in the middle of a restart).
# Samples go to ${SOAK_DIR:-target/soak}/samples.tsv, the run's summary to summary.json,
# its table to table.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

duration=${1:-600}
rate=${2:-5000}
shift $(($# > 2 ? 2 : $#))
dir=${SOAK_DIR:-target/soak}
interval=5
fd_slack=${SOAK_FD_SLACK:-16}
((duration >= 90)) || { echo "soak: DURATION_S must be at least 90 (the first minute is the reference)" >&2; exit 2; }

cargo build --release --bin rolling-deploy >&2
mkdir -p "$dir"
samples=$dir/samples.tsv
summary=$dir/summary.json

# One restart of the default run takes about 1.1 s (offline window 500 ms, the in-process
# registry's 300 ms, 300 ms to start the replacement): ten instances, ~11 s a round. The
# quiet times before and after are 5 s each. Ask for the rounds that fit with 10 % spare.
rounds=$(((duration - 10) * 10 / 121))
((rounds >= 1)) || rounds=1

./target/release/rolling-deploy --quiet --rate "$rate" --duration "${duration}s" \
    --rounds "$rounds" --json "$summary" "$@" >"$dir/table.txt" 2>"$dir/stderr.txt" &
pid=$!
# Never leave the run behind if this script is interrupted.
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT INT TERM

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status" 2>/dev/null || true; }
fds() { find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }

printf 'seconds\trss_kib\tfds\n' >"$samples"
echo "soak: rolling-deploy pid $pid, ${duration}s at $rate req/s, $rounds rounds; samples every ${interval}s in $samples" >&2
start=$SECONDS
rss_minute='' fds_minute='' rss_last='' fds_last='' rss_peak=0
while kill -0 "$pid" 2>/dev/null; do
    sleep "$interval"
    elapsed=$((SECONDS - start))
    rss=$(rss_kib)
    [[ -n "$rss" ]] || break
    fd=$(fds)
    printf '%s\t%s\t%s\n' "$elapsed" "$rss" "$fd" >>"$samples"
    # The last sample taken while the load still runs (the summary is printed after it).
    if ((elapsed <= duration)); then
        rss_last=$rss fds_last=$fd
    fi
    ((rss > rss_peak)) && rss_peak=$rss
    if [[ -z "$rss_minute" ]] && ((elapsed >= 60)); then
        rss_minute=$rss fds_minute=$fd
        echo "soak: after the first minute: RSS ${rss} KiB, ${fd} fds" >&2
    fi
done
code=0
wait "$pid" || code=$?
trap - EXIT INT TERM

read -r sent failed restarts planned worst_p99 worst_at < <(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
worst = max(range(len(s["per_second"])), key=lambda i: s["per_second"][i]["p99_ms"])
print(s["sent"], s["failed"], s["restarts"], s["restarts_planned"],
      round(s["per_second"][worst]["p99_ms"]), worst)
' "$summary")
ratio=$(python3 -c "print(f'{$rss_last / $rss_minute:.3f}')")
echo
echo "soak: ${duration}s, $rate req/s, $rounds rounds (rolling-deploy exit $code)"
echo "  requests  sent $sent  failed $failed  restarts $restarts of $planned"
echo "  RSS       after 1 min ${rss_minute} KiB   at the end ${rss_last} KiB   ratio $ratio (limit 1.2)   peak ${rss_peak} KiB"
echo "  open fds  after 1 min ${fds_minute}   at the end ${fds_last}   (limit +${fd_slack})"
# Resident memory follows the requests in flight (about 40 KiB each, see testkit's load.rs),
# so a stall of the machine shows as a step in samples.tsv at the second it happened.
echo "  slowest second: p99 ${worst_p99} ms at ${worst_at}s (a stall raises the requests in flight, and RSS with them)"
ok=1
[[ $failed -eq 0 && $restarts -eq $planned && $code -eq 0 ]] || { echo "soak: FAILED: requests failed or restarts missed" >&2; ok=0; }
python3 -c "import sys; sys.exit(0 if $rss_last <= 1.2 * $rss_minute else 1)" || { echo "soak: FAILED: memory grew more than 1.2x" >&2; ok=0; }
((fds_last <= fds_minute + fd_slack)) || { echo "soak: FAILED: open fds grew" >&2; ok=0; }
((ok)) && echo "soak: PASSED"
((ok))
