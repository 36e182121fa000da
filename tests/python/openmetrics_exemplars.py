"""Parses an OpenMetrics scrape (standard input) with the Prometheus Python client's
strict OpenMetrics parser and prints, as JSON, every exemplar of every histogram
bucket: its family, its trace_id and span_id labels and its value. A scrape the parser
refuses fails with its error.
"""
import json
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families

exemplars = []
for family in text_string_to_metric_families(sys.stdin.read()):
    for sample in family.samples:
        if sample.exemplar is not None:
            exemplars.append(
                {
                    "family": family.name,
                    "trace_id": sample.exemplar.labels.get("trace_id"),
                    "span_id": sample.exemplar.labels.get("span_id"),
                    "value": sample.exemplar.value,
                    "le": sample.labels.get("le"),
                }
            )
json.dump(exemplars, sys.stdout)
