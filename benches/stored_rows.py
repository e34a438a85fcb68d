"""The rows the GPU benches store, one a line: `PREFIX key=value ... {json}`
(the keys say which process, round or piece; the JSON holds the figures)."""

import json


def parse(line, prefix):
    """(fields, figures) of a stored row that starts with `prefix` and a
    space; ValueError (with why) when the rest is not such a row."""
    head, payload = line[len(prefix) + 1:].split(" {", 1)
    fields = dict(kv.split("=", 1) for kv in head.split())
    return fields, json.loads("{" + payload)
