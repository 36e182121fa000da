#!/usr/bin/env bash
# The fleet simulator (sim/, docs/simulator.md): runs seeded schedules of deploys and
# faults against the real framework on simulated hosts, and checks the invariants.
#
#   bash scripts/sim.sh [SCHEDULES] [FLAGS]   seeds 0..SCHEDULES (default 1000)
#   bash scripts/sim.sh --seed N [FLAGS]      one seed, its schedule and what it came to
#   bash scripts/sim.sh --soak [FLAGS]        blocks of 1 000 seeds until one fails
#
# FLAGS: --first N (the first seed), --no-stall-detection (puts that defect back, to
# see it found), --trace (the framework's log on stderr, RUST_LOG, in simulated time).
# Ends with `sim: schedules=N violations=V calls=C lost=L` (V: seeds that broke an
# invariant; L: calls that failed, each at a kill or pause it met). Exit 1 on a
# violation, 2 on a bad argument.
set -euo pipefail
cd "$(dirname "$0")/.."
run() { cargo test -p lossless-rpc-sim --release --test schedules -- "$@"; }
case "${1:-}" in
-h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' ;;
"") run --schedules 1000 ;;
--soak)
    shift
    first=0
    while run --first "$first" --schedules 1000 "$@"; do first=$((first + 1000)); done
    ;;
[0-9]*)
    schedules=$1
    shift
    run --schedules "$schedules" "$@"
    ;;
*) run "$@" ;;
esac
