#!/usr/bin/env bash
# The fleet simulator (sim/, docs/simulator.md): runs seeded schedules of deploys and
# faults against the real framework on simulated hosts, and checks the invariants.
#
#   bash scripts/sim.sh [SCHEDULES]      seeds 0..SCHEDULES (default 1000)
#   bash scripts/sim.sh --seed N         one seed, its schedule and what it came to
#   bash scripts/sim.sh --soak           seeds from 0 on until one fails or Ctrl-C
#
# Ends with `sim: schedules=N violations=V calls=C lost=L` (V: seeds that broke an
# enforced invariant; L: calls that failed, each excused by a hard fault it met).
set -euo pipefail
cd "$(dirname "$0")/.."
run() { cargo test -p lossless-rpc-sim --release --test schedules -- "$@"; }
case "${1:-}" in
--seed) run --seed "$2" ;;
--soak)
    first=0
    while run --first "$first" --schedules 1000 | tail -3; do first=$((first + 1000)); done
    ;;
*) run --schedules "${1:-1000}" ;;
esac
