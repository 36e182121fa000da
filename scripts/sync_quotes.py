#!/usr/bin/env python3
"""Copies each quoted file into the code block after its `<!-- quote: PATH -->` marker in
README.md and every docs/*.md (PATH from the repository root).

examples/getting-started/tests/docs_quote_the_files.rs fails when a block and its file
differ; run this after editing a quoted file, and review the diff.

--check writes nothing: it lists each stale quote (document, line of its marker, file
quoted) and exits 1 if there is one, so CI can say which block to sync.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^<!-- quote: (\S+) -->$")


def documents() -> list[pathlib.Path]:
    """README.md and the book's chapters: every page a reader may meet a quote on."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def sync(doc: pathlib.Path) -> tuple[list[str], list[str]]:
    """The document with every quote made equal to its file, and the stale quotes."""
    name = doc.relative_to(ROOT)
    lines = doc.read_text().split("\n")
    out, i, stale = [], 0, []
    while i < len(lines):
        line = lines[i]
        out.append(line)
        match = MARKER.match(line.strip())
        i += 1
        if not match:
            continue
        fence = lines[i] if i < len(lines) else ""
        if not fence.startswith("```"):
            sys.exit(f"{name}:{i}: the line after {line!r} must open a code block")
        try:
            end = lines.index("```", i + 1)
        except ValueError:
            sys.exit(f"{name}:{i}: the code block after {line!r} is never closed")
        quoted = ROOT / match.group(1)
        if not quoted.is_file():
            sys.exit(f"{name}:{i}: quotes {match.group(1)}, which is no file")
        body = quoted.read_text().rstrip("\n").split("\n")
        if lines[i + 1 : end] != body:
            stale.append(f"{name}:{i}: the block quoting {match.group(1)} differs from the file")
        out += [fence, *body, "```"]
        i = end + 1
    return out, stale


def main() -> int:
    check = sys.argv[1:] == ["--check"]
    if sys.argv[1:] and not check:
        sys.exit("usage: sync_quotes.py [--check]")
    all_stale = []
    for doc in documents():
        out, stale = sync(doc)
        all_stale += stale
        if stale and not check:
            doc.write_text("\n".join(out))
            print(f"updated {doc.relative_to(ROOT)}")
    if check and all_stale:
        print("\n".join(all_stale))
        print("stale quotes: run python3 scripts/sync_quotes.py, and review the diff")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
