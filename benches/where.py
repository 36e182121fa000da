#!/usr/bin/env python3
"""Where one stack's instructions per request go, against a base stack.

Reads the runs `INSTRUCTIONS_KEEP=DIR bash benches/instructions.sh` kept (two runs per
stack, 2000 and 6000 ms) and prints, for each function, its instructions per request in
BASE and in STACK and the difference, largest differences first. A function's figure is
(its count in the longer run less its count in the shorter) / (requests in the longer
less requests in the shorter): start-up and shutdown cancel out, as in instructions.sh.

    python3 benches/where.py DIR BASE STACK [--inclusive] [--top N]

Self cost by default (instructions in the function's own body); `--inclusive` counts its
callees too, which shows which layer of the stack a cost sits under.
"""
import argparse
import re
import subprocess
import sys
from pathlib import Path

LINE = re.compile(r"^\s*([\d,]+) \([\s\d.]+%\)\s+(.*?)(?: \([\d,]+x\))?(?: \[[^\]]*\])?$")


def costs(run: Path, inclusive: bool) -> dict[str, int]:
    """Each function's instruction count in one callgrind run, by `file:function`."""
    args = ["callgrind_annotate", "--auto=no", "--threshold=100", f"--inclusive={'yes' if inclusive else 'no'}", str(run)]
    text = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    out: dict[str, int] = {}
    for line in text.splitlines():
        m = LINE.match(line)
        if m and "PROGRAM TOTALS" not in m.group(2):
            name = m.group(2).split(":", 1)[-1]
            out[name] = out.get(name, 0) + int(m.group(1).replace(",", ""))
    return out


def per_request(directory: Path, stack: str, inclusive: bool) -> dict[str, float]:
    """Each function's instructions per request of STACK (longer run less shorter)."""
    runs = sorted(directory.glob(f"{stack}.*.callgrind"), key=lambda p: int(p.name.split(".")[-2]))
    if len(runs) != 2:
        sys.exit(f"where.py: {directory} holds {len(runs)} runs of {stack}, not 2 (run instructions.sh with INSTRUCTIONS_KEEP)")
    short, long = runs
    requests = [int(p.with_suffix(".requests").read_text()) for p in runs]
    if requests[1] <= requests[0]:
        sys.exit(f"where.py: the longer run of {stack} served no more requests than the shorter")
    a, b = costs(short, inclusive), costs(long, inclusive)
    return {k: (b.get(k, 0) - a.get(k, 0)) / (requests[1] - requests[0]) for k in a.keys() | b.keys()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("base")
    parser.add_argument("stack")
    parser.add_argument("--inclusive", action="store_true")
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    base = per_request(args.dir, args.base, args.inclusive)
    stack = per_request(args.dir, args.stack, args.inclusive)
    rows = [(stack.get(k, 0) - base.get(k, 0), base.get(k, 0), stack.get(k, 0), k) for k in base.keys() | stack.keys()]
    rows.sort(key=lambda r: -abs(r[0]))
    print(f"{'diff':>8} {args.base:>10} {args.stack:>10}  function (instructions per request)")
    for diff, b, s, name in rows[: args.top]:
        print(f"{diff:+8.0f} {b:10.0f} {s:10.0f}  {name[:150]}")
    if not args.inclusive:
        print(f"{sum(stack.values()) - sum(base.values()):+8.0f} {sum(base.values()):10.0f} {sum(stack.values()):10.0f}  all functions")


if __name__ == "__main__":
    main()
