#!/usr/bin/env python3
"""Checks the links of README.md and of the book (every docs/*.md).

- every relative link or image points to a file or folder that exists;
- every `#anchor`, in the same page or another page, names a heading of that page, by
  the rule GitHub and mdBook share for a heading's id: its text in lower case, spaces
  to '-', every character but letters, digits, '-' and '_' dropped; a repeated heading
  gets '-1', '-2', ...;
- every chapter under docs/ is listed in docs/SUMMARY.md, so the book leaves none out.

Links inside code blocks and code spans are not links and are not checked; links with a
scheme (https:, mailto:) are not followed. Prints one line per problem, with its page
and line, and exits 1 if there is one.
"""
import pathlib
import re
import sys
import urllib.parse

ROOT = pathlib.Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)", re.S)
# [text](target "title") and ![alt](target); the text may run over a line break.
LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^()\s<>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", re.M)
HTML = re.compile(r"""\b(?:href|src)\s*=\s*["']([^"']+)["']""")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def documents() -> list[pathlib.Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def without_code(text: str) -> str:
    """`text` with fenced blocks and code spans blanked, its line breaks kept."""
    lines, fenced = [], None
    for line in text.split("\n"):
        match = FENCE.match(line)
        if fenced:
            if match and match.group(1) == fenced:
                fenced = None
            lines.append("")
        elif match:
            fenced = match.group(1)
            lines.append("")
        else:
            lines.append(line)
    blanked = "\n".join(lines)
    return CODE_SPAN.sub(lambda m: "code" + "\n" * m.group(0).count("\n"), blanked)


def slug(heading: str) -> str:
    """The id GitHub and mdBook give a heading of this Markdown text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = text.replace("`", "").replace("*", "")
    text = text.strip().lower()
    kept = (c if c.isalnum() or c in "-_" else "-" if c == " " else "" for c in text)
    return "".join(kept)


def anchors(page: pathlib.Path, cache: dict) -> set[str]:
    if page not in cache:
        found, seen, fenced = set(), {}, None
        for line in page.read_text().split("\n"):
            match = FENCE.match(line)
            if fenced:
                fenced = None if match and match.group(1) == fenced else fenced
                continue
            if match:
                fenced = match.group(1)
                continue
            heading = HEADING.match(line)
            if not heading:
                continue
            base = slug(heading.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
        cache[page] = found
    return cache[page]


def targets(text: str):
    """(line, target) of every link, image, reference definition and HTML link."""
    prose = without_code(text)
    for pattern in (LINK, REFERENCE, HTML):
        for match in pattern.finditer(prose):
            target = match.group(match.lastindex)
            yield prose.count("\n", 0, match.start()) + 1, target


def check(page: pathlib.Path, cache: dict) -> list[str]:
    name = page.relative_to(ROOT)
    problems = []
    for line, target in targets(page.read_text()):
        where = f"{name}:{line}: {target}"
        if not target or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):
            continue  # https:, mailto: and the like are not followed
        path, _, anchor = target.partition("#")
        path = urllib.parse.unquote(path)
        if path.startswith("/"):
            problems.append(f"{where}: an absolute path; links are relative to the page")
            continue
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            problems.append(f"{where}: no such file or folder")
            continue
        if anchor and linked.suffix == ".md":
            if urllib.parse.unquote(anchor) not in anchors(linked, cache):
                problems.append(f"{where}: {linked.relative_to(ROOT)} has no heading #{anchor}")
    return problems


def unlisted() -> list[str]:
    summary = ROOT / "docs" / "SUMMARY.md"
    listed = {
        (summary.parent / urllib.parse.unquote(t.partition("#")[0])).resolve()
        for _, t in targets(summary.read_text())
    }
    return [
        f"docs/SUMMARY.md: lists no {page.relative_to(ROOT)}"
        for page in sorted((ROOT / "docs").glob("*.md"))
        if page.name != "SUMMARY.md" and page.resolve() not in listed
    ]


def main() -> int:
    cache: dict = {}
    problems = [p for page in documents() for p in check(page, cache)] + unlisted()
    print("\n".join(problems) if problems else f"check_docs: {len(documents())} pages, every link leads somewhere")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
