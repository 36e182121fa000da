#!/usr/bin/env bash
# The fleet simulator (sim/, docs/simulator.md): a rolling deploy of 10 000 providers
# behind 1 000 consumers (and one consumer's heap after it, `sim-fleet-memory: …`), then
# seeded schedules of deploys and faults against the real framework on simulated hosts;
# the invariants checked on every run.
#
#   bash scripts/sim.sh [SCHEDULES]          the fleet, then seeds 0..SCHEDULES (default 1000)
#   bash scripts/sim.sh SCHEDULES FLAGS      those seeds only, with FLAGS
#   bash scripts/sim.sh --seed N [FLAGS]     one seed, its schedule and what it came to
#   bash scripts/sim.sh --soak [FLAGS]       blocks of 1 000 seeds until one fails
#   bash scripts/sim.sh --fleet [ARGS]       the fleet only (ARGS: --instances N,
#                                            --consumers N, --batch N, --seed N, --threads N)
#
# FLAGS: --first N (the first seed), --no-stall-detection (puts that defect back, to
# see it found), --trace (the framework's log on stderr, RUST_LOG, in simulated time).
# Ends with `sim: schedules=N violations=V calls=C lost=L` (V: seeds that broke an
# invariant; L: calls that failed, each at a kill or pause it met) and
# `sim-fleet: instances=10000 consumers=1000 lost=L roll_s=… registry_writes_per_s=…
# watch_events_per_s=…`. Exit 1 on a violation, 2 on a bad argument.
set -euo pipefail
cd "$(dirname "$0")/.."
run() { cargo test -p lossless-rpc-sim --release --test schedules -- "$@"; }
fleet() { cargo test -p lossless-rpc-sim --release --test fleet -- "$@"; }
fleet_memory() { cargo test -p lossless-rpc-sim --release --test fleet_memory; }
# The fleet (its memory, then its roll), then the schedules even if the fleet failed;
# the first failure's status. The fleet's last line is printed again at the end, so the
# run ends with `sim: schedules=…` and `sim-fleet: …`.
fleet_and_schedules() {
    local status=0 log
    log=$(mktemp)
    trap 'rm -f "$log"' RETURN
    fleet_memory || status=$?
    fleet --full | tee "$log" || { [ "$status" -ne 0 ] || status=$?; }
    run --schedules "$1" || { [ "$status" -ne 0 ] || status=$?; }
    grep '^sim-fleet:' "$log" || { [ "$status" -ne 0 ] || status=1; }
    return "$status"
}
case "${1:-}" in
-h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' ;;
"") fleet_and_schedules 1000 ;;
--fleet)
    shift
    fleet --full "$@"
    ;;
--soak)
    shift
    first=0
    while run --first "$first" --schedules 1000 "$@"; do first=$((first + 1000)); done
    ;;
[0-9]*)
    schedules=$1
    shift
    if [ $# -eq 0 ]; then
        fleet_and_schedules "$schedules"
    else
        run --schedules "$schedules" "$@"
    fi
    ;;
*) run "$@" ;;
esac
