"""Parses a Prometheus text exposition (stdin) with the Prometheus Python client's own
parser, as a scrape would, and prints one line per sample: `name{labels} value`.
Exits non-zero (with the parser's message) when the text is not valid exposition."""

import sys

from prometheus_client.parser import text_string_to_metric_families


def main() -> None:
    text = sys.stdin.read()
    families = 0
    for family in text_string_to_metric_families(text):
        families += 1
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            print(f"{sample.name}{{{labels}}} {sample.value}")
    print(f"families {families}", file=sys.stderr)


if __name__ == "__main__":
    main()
