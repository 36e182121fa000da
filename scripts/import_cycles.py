#!/usr/bin/env python3
"""Finds import circles between the source files of each crate of the workspace.

    python3 scripts/import_cycles.py            # every crate; exit 1 if any circle
    python3 scripts/import_cycles.py --edges    # also print every file -> file edge

A file A imports a file B when A names an item through a `crate::`, `super::` or
`self::` path (in a `use` or inline) that is defined in B, or that B re-exports from a
file below it. A module's file declaring its own children (`mod x;`, `pub use x::Y`)
is the module tree, not an import, and is not an edge; everything else is, so a child
that uses its parent while the parent calls back into the child through a sibling is a
circle. Test code (`#[cfg(test)]` modules, inline or in their own file) is left out.

Circles are what make a layer impossible to read on its own: following a value down
the stack should never lead back up to where it started.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MOD_DECL = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", re.M)
CFG_TEST_MOD_DECL = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;")
PATH_REF = re.compile(r"\b(crate|super|self)((?:::\w+)+)")
USE_STMT = re.compile(r"\buse\s+([^;]+);")
ITEM_DEF = re.compile(
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?(?:unsafe\s+)?(?:const\s+)?"
    r"(?:fn|struct|enum|trait|type|const|static|union|macro_rules!)\s+(\w+)",
    re.M,
)


def strip_comments_and_strings(text: str) -> str:
    """Removes comments and string literals, keeping line structure."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not text[i - 1].isalnum()):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = '"' + hashes
            j = text.find(end, i + 2 + len(hashes))
            i = n if j < 0 else j + len(end)
            out.append('""')
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            out.append('""')
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]):
            m = re.match(r"'(\\.|[^\\'])'", text[i:])
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_test_blocks(code: str) -> str:
    """Removes inline `#[cfg(test)] mod name { ... }` blocks."""
    while True:
        m = re.search(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{", code)
        if not m:
            return code
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            j += 1
        code = code[: m.start()] + code[j:]


def expand_use(tree: str) -> list[str]:
    """`a::{b, c::{d, e}}` -> [`a::b`, `a::c::d`, `a::c::e`]."""
    tree = re.sub(r"\s+", "", tree)
    if "{" not in tree:
        return [tree]
    head, _, rest = tree.partition("{")
    inner = rest[: rest.rfind("}")]
    parts, depth, current = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += {"{": 1, "}": -1}.get(ch, 0)
        current += ch
    if current:
        parts.append(current)
    out = []
    for part in parts:
        for sub in expand_use(part):
            out.append(head + sub if sub != "self" else head.rstrip(":"))
    return out


class Module:
    def __init__(self, path: tuple[str, ...], file: Path):
        self.path = path
        self.file = file
        self.code = ""
        self.defs: set[str] = set()
        self.reexports: dict[str, list[str]] = {}  # name -> module-relative path segments
        self.inline: dict[str, "Module"] = {}


def child_file(parent: Path, is_mod_root: bool, name: str) -> Path | None:
    base = parent.parent if is_mod_root else parent.with_suffix("")
    for candidate in (base / f"{name}.rs", base / name / "mod.rs"):
        if candidate.exists():
            return candidate
    return None


def load_crate(src: Path) -> dict[tuple[str, ...], Module]:
    root_file = src / "lib.rs" if (src / "lib.rs").exists() else src / "main.rs"
    modules: dict[tuple[str, ...], Module] = {}

    def visit(path: tuple[str, ...], file: Path) -> None:
        text = file.read_text()
        tests = set(CFG_TEST_MOD_DECL.findall(text))
        code = strip_test_blocks(strip_comments_and_strings(text))
        module = Module(path, file)
        module.code = code
        module.defs = set(ITEM_DEF.findall(code))
        for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", code):
            for full in expand_use(m.group(1)):
                segments = full.split("::")
                alias = segments[-1]
                if "as" in alias:
                    alias = alias.split("as")[-1]
                module.reexports[alias] = segments
        modules[path] = module
        is_root = file.name in ("lib.rs", "main.rs", "mod.rs")
        for name in MOD_DECL.findall(code):
            if name in tests:
                continue
            child = child_file(file, is_root, name)
            if child is not None:
                visit(path + (name,), child)

    visit((), root_file)
    return modules


def resolve(modules, here: tuple[str, ...], segments: list[str], depth=0):
    """The module that defines the item `segments` names, seen from module `here`."""
    if depth > 8 or not segments:
        return None
    first = segments[0]
    if first == "crate":
        base, rest = (), segments[1:]
    elif first in ("super", "self"):
        base, rest = here, segments
        while rest and rest[0] in ("super", "self"):
            if rest[0] == "super":
                base = base[:-1]
            rest = rest[1:]
    else:
        # relative to `here`: a child module or an item of `here`
        base, rest = here, segments
    current = base
    i = 0
    while i < len(rest) and current + (rest[i],) in modules:
        current = current + (rest[i],)
        i += 1
    remaining = rest[i:]
    if not remaining:
        return current
    name = remaining[0]
    module = modules[current]
    if name in module.reexports:
        target = module.reexports[name]
        if target[0] not in ("crate", "super", "self") and current + (target[0],) not in modules:
            return current  # re-export of an external crate's item
        found = resolve(modules, current, target, depth + 1)
        return found if found is not None else current
    return current


def edges_of(modules) -> dict[Path, dict[Path, set[str]]]:
    edges: dict[Path, dict[Path, set[str]]] = {}
    for path, module in modules.items():
        refs: list[list[str]] = []
        for m in USE_STMT.finditer(module.code):
            for full in expand_use(m.group(1)):
                segs = full.split("::")
                if segs[0] in ("crate", "super", "self") or path + (segs[0],) in modules:
                    refs.append([s.split("as")[0] if " " in s else s for s in segs])
        for m in PATH_REF.finditer(module.code):
            refs.append([m.group(1)] + m.group(2).strip(":").split("::"))
        for segs in refs:
            segs = [s for s in segs if s and s != "*"]
            target = resolve(modules, path, segs)
            if target is None or target == path:
                continue
            # A module declaring and re-exporting its own descendants is the tree.
            if target[: len(path)] == path:
                continue
            dst = modules[target].file
            edges.setdefault(module.file, {}).setdefault(dst, set()).add(segs[-1])
    return edges


def cycles(edges) -> list[list[Path]]:
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    nodes = set(edges) | {d for ds in edges.values() for d in ds}

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            strong(v)
    return out


def main() -> int:
    show_edges = "--edges" in sys.argv
    found = 0
    crates = sorted(p.parent for p in ROOT.glob("*/Cargo.toml") if (p.parent / "src").is_dir())
    for crate in crates:
        src = crate / "src"
        if not ((src / "lib.rs").exists() or (src / "main.rs").exists()):
            continue
        modules = load_crate(src)
        edges = edges_of(modules)
        if show_edges:
            for a in sorted(edges):
                for b in sorted(edges[a]):
                    names = ", ".join(sorted(edges[a][b]))
                    print(f"{a.relative_to(ROOT)} -> {b.relative_to(ROOT)}: {names}")
        for component in cycles(edges):
            found += 1
            files = ", ".join(str(f.relative_to(ROOT)) for f in component)
            print(f"circle in {crate.name}: {files}")
            members = set(component)
            for a in component:
                for b, names in sorted(edges.get(a, {}).items()):
                    if b in members:
                        print(f"  {a.relative_to(ROOT)} -> {b.relative_to(ROOT)}: {', '.join(sorted(names))}")
    if found:
        print(f"{found} import circle(s)")
        return 1
    print(f"no import circle between files ({len(crates)} crates)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
