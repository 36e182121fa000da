#!/usr/bin/env bash
# Instructions per request of each stack of the `overhead`, `balance`, `message_size` or
# `streaming` bench, counted by valgrind's callgrind: a figure that does not move with the
# machine's other tenants, unlike requests per second on a shared 2-core machine.
#
#   bash benches/instructions.sh [overhead [STACK...]]  (default: plain rpc rpc-off rpc-client rpc-server)
#   bash benches/instructions.sh balance [CLIENT...]    (default: tonic rpc)
#   bash benches/instructions.sh message_size [STACK...] (default: plain rpc; at
#       MESSAGE_SIZE_BYTES, default 1048576, and MESSAGE_SIZE_COMPRESSION, default none;
#       also prints instructions per payload byte, the request's and the reply's)
#   bash benches/instructions.sh streaming [STACK...]   (default: plain rpc rpc-resumable;
#       rpc-server: tonic's client against our provider; server streams of 1 000
#       messages of 100 B, also per message: rpc-resumable less rpc is the resume
#       layer's cost)
#
# Each stack runs twice in the bench's profile mode (OVERHEAD_PROFILE / BALANCE_PROFILE /
# MESSAGE_SIZE_PROFILE / STREAMING_PROFILE, 16 concurrent calls, 8 for message_size, 4
# for streaming), for 2 s and for 6 s of valgrind's slowed time; the difference of
# the two instruction counts over the difference of their request counts is the cost of
# one request, start-up excluded. Both sides of the call are in the process, so a
# stack's figure is client and server together; user space only (no kernel, no
# syscalls). Needs valgrind (`apt-get install valgrind`). Prints one line per stack and
# the ratios to the first one (plain, or tonic's balancer).
#
# INSTRUCTIONS_CACHE=1 runs callgrind's cache simulation too (slower) and prints each
# stack's first-level instruction and data-read cache misses per request, and their
# ratios: two stacks that run the same instructions at different speeds differ there.
#
# INSTRUCTIONS_KEEP=DIR keeps both runs of each stack (DIR/STACK.MILLIS.callgrind and
# DIR/STACK.MILLIS.requests), for `callgrind_annotate --inclusive=yes` on one run, or for
# `python3 benches/where.py DIR BASE STACK`: each function's instructions per request
# (the longer run less the shorter, as the totals here), STACK against BASE.
set -euo pipefail
cd "$(dirname "$0")/.."

target=${1:-overhead}
shift || true
stacks=("$@")
case $target in
overhead) [[ ${#stacks[@]} -gt 0 ]] || stacks=(plain rpc rpc-off rpc-client rpc-server) ;;
balance) [[ ${#stacks[@]} -gt 0 ]] || stacks=(tonic rpc) ;;
message_size) [[ ${#stacks[@]} -gt 0 ]] || stacks=(plain rpc) ;;
streaming) [[ ${#stacks[@]} -gt 0 ]] || stacks=(plain rpc rpc-resumable) ;;
*) echo "instructions.sh: the bench is overhead, balance, message_size or streaming, not $target" >&2; exit 2 ;;
esac
if [[ $target == message_size ]]; then
    bytes=${MESSAGE_SIZE_BYTES:-1048576}
    if ! [[ $bytes =~ ^[0-9]+$ ]] || (( bytes < 1 || bytes > 4194240 )); then
        echo "instructions.sh: MESSAGE_SIZE_BYTES is a number of bytes from 1 to 4194240, not $bytes" >&2
        exit 2
    fi
fi
profile_var=${target^^}_PROFILE
command -v valgrind >/dev/null || { echo "instructions.sh: needs valgrind" >&2; exit 2; }
# Built as `cargo bench --bench X` builds it (with `-p` cargo would pick other features and
# build again); cargo's progress shows on stderr.
bench=$(cargo bench --bench "$target" --no-run --message-format=json |
    python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == sys.argv[1] and m.get("executable"):
        print(m["executable"])' "$target")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

case ${INSTRUCTIONS_CACHE:-0} in
0) cache=no ;;
1) cache=yes ;;
*) echo "instructions.sh: INSTRUCTIONS_CACHE is 1 (simulate the caches) or 0, not ${INSTRUCTIONS_CACHE}" >&2; exit 2 ;;
esac

# count STACK MILLIS: prints "<instructions> <requests> <I1 misses> <D1 read misses>" of
# one run (the misses 0 without INSTRUCTIONS_CACHE=1).
count() {
    env "$profile_var=$1" "${profile_var}_MILLIS=$2" valgrind --tool=callgrind --cache-sim=$cache \
        --callgrind-out-file="$work/out" "$bench" --bench >"$work/stdout" 2>"$work/stderr"
    local requests instructions misses
    requests=$(sed -n 's/.* calls: \([0-9]*\) requests.*/\1/p' "$work/stdout")
    # "Collected : Ir [Dr Dw I1mr D1mr ...]": the instructions, then with the cache
    # simulation the 4th and 5th counts.
    read -r instructions misses < <(sed -n 's/.*Collected : //p' "$work/stderr" |
        awk '{ print $1, (NF >= 5 ? $4 " " $5 : "0 0") }')
    if [[ -n ${INSTRUCTIONS_KEEP:-} ]]; then
        mkdir -p "$INSTRUCTIONS_KEEP"
        cp "$work/out" "$INSTRUCTIONS_KEEP/$1.$2.callgrind"
        echo "$requests" >"$INSTRUCTIONS_KEEP/$1.$2.requests"
    fi
    echo "$instructions $requests $misses"
}

printf '%-11s %14s\n' stack "instr/request"
declare -A per imiss dmiss
for stack in "${stacks[@]}"; do
    read -r i1 r1 im1 dm1 < <(count "$stack" 2000)
    read -r i2 r2 im2 dm2 < <(count "$stack" 6000)
    per[$stack]=$(( (i2 - i1) / (r2 - r1) ))
    imiss[$stack]=$(( (im2 - im1) / (r2 - r1) ))
    dmiss[$stack]=$(( (dm2 - dm1) / (r2 - r1) ))
    if [[ $target == message_size ]]; then
        python3 -c "import sys; print(f'{sys.argv[1]:<11} {int(sys.argv[2]):>14} ({int(sys.argv[2]) / int(sys.argv[3]):.2f} per payload byte)')" \
            "$stack" "${per[$stack]}" "$(( 2 * bytes ))"
    elif [[ $target == streaming ]]; then
        python3 -c "import sys; print(f'{sys.argv[1]:<11} {int(sys.argv[2]):>14} ({int(sys.argv[2]) / 1000:.0f} per message)')" \
            "$stack" "${per[$stack]}"
    else
        printf '%-11s %14s\n' "$stack" "${per[$stack]}"
    fi
    if [[ $cache == yes ]]; then
        printf '%-11s first-level misses per request: instruction %s, data read %s\n' \
            "$stack" "${imiss[$stack]}" "${dmiss[$stack]}"
    fi
done
base=${stacks[0]}
for stack in "${stacks[@]:1}"; do
    python3 -c "import sys; a, b = int(sys.argv[3]), int(sys.argv[4]); print(f'{sys.argv[1]}/{sys.argv[2]}: {a / b:.3f} ({a - b:+d} instructions per request)')" \
        "$stack" "$base" "${per[$stack]}" "${per[$base]}"
    if [[ $cache == yes ]]; then
        python3 -c "import sys; i, j, d, e = map(int, sys.argv[3:]); print(f'{sys.argv[1]}/{sys.argv[2]} misses: instruction {i / j:.3f}, data read {d / e:.3f}')" \
            "$stack" "$base" "${imiss[$stack]}" "${imiss[$base]}" "${dmiss[$stack]}" "${dmiss[$base]}"
    fi
done
