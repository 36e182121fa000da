#!/usr/bin/env python3
"""Copies each quoted file into the code block after its `<!-- quote: PATH -->` marker in
README.md and docs/getting-started.md (PATH from the repository root).

examples/getting-started/tests/docs_quote_the_files.rs fails when a block and its file
differ; run this after editing a quoted file, and review the diff.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ["README.md", "docs/getting-started.md"]
MARKER = re.compile(r"^<!-- quote: (\S+) -->$")


def sync(doc: pathlib.Path) -> bool:
    lines = doc.read_text().split("\n")
    out, i, changed = [], 0, False
    while i < len(lines):
        line = lines[i]
        out.append(line)
        match = MARKER.match(line.strip())
        i += 1
        if not match:
            continue
        fence = lines[i]
        if not fence.startswith("```"):
            sys.exit(f"{doc}: the line after {line!r} must open a code block")
        end = lines.index("```", i + 1)
        body = (ROOT / match.group(1)).read_text().rstrip("\n").split("\n")
        changed |= lines[i + 1 : end] != body
        out += [fence, *body, "```"]
        i = end + 1
    if changed:
        doc.write_text("\n".join(out))
    return changed


for name in DOCS:
    if sync(ROOT / name):
        print(f"updated {name}")
