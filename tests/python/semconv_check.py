"""Checks names against OpenTelemetry's semantic-conventions registry, as the
`opentelemetry-semantic-conventions` package from PyPI holds it (generated from the
conventions' YAML; scripts/test.sh pins the version).

Reads one JSON object on standard input:

    {"attributes": ["rpc.method", ...],      # span attribute names
     "labels": ["rpc_method", ...],          # Prometheus label names (dots as underscores)
     "metrics": ["rpc.server.call.duration"]} # metric names, dotted, without a unit

and prints one JSON object: the registry's schema version, and for each kind the names
the registry does not know (`unknown_*`) and the ones it marks deprecated
(`deprecated_*`). Only reads the package's source (constants and their docstrings):
importing it would warn on every deprecated name.
"""
import ast
import json
import sys
from pathlib import Path

import opentelemetry.semconv as semconv


def registry(folder: str) -> dict[str, bool]:
    """Every name the package's `folder` modules define, mapped to whether deprecated."""
    names: dict[str, bool] = {}
    root = Path(semconv.__file__).parent
    for module in sorted(root.glob(f"{folder}/*.py")):
        body = ast.parse(module.read_text()).body
        for statement, after in zip(body, body[1:] + [None]):
            if not (isinstance(statement, ast.AnnAssign) and isinstance(statement.value, ast.Constant)):
                continue
            if not isinstance(statement.value.value, str):
                continue
            doc = ""
            if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
                doc = str(after.value.value).strip()
            name = statement.value.value
            names[name] = names.get(name, False) or doc.startswith("Deprecated")
    return names


def schema_version() -> str:
    from opentelemetry.semconv.schemas import Schemas

    return max((s.value.rsplit("/", 1)[-1] for s in Schemas), key=lambda v: tuple(map(int, v.split("."))))


def check(names: list[str], known: dict[str, bool]) -> tuple[list[str], list[str]]:
    unknown = sorted(n for n in names if n not in known)
    deprecated = sorted(n for n in names if known.get(n))
    return unknown, deprecated


def main() -> None:
    asked = json.load(sys.stdin)
    # The stable modules last: the incubating ones repeat a stable name as "deprecated in
    # favour of" its stable definition.
    attributes = registry("_incubating/attributes") | registry("attributes")
    metrics = registry("_incubating/metrics") | registry("metrics")
    # A Prometheus label is an attribute with its dots made underscores.
    by_label = {name.replace(".", "_"): deprecated for name, deprecated in attributes.items()}
    out = {"schema_version": schema_version()}
    for kind, known in (("attributes", attributes), ("labels", by_label), ("metrics", metrics)):
        unknown, deprecated = check(asked.get(kind, []), known)
        out[f"unknown_{kind}"] = unknown
        out[f"deprecated_{kind}"] = deprecated
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
