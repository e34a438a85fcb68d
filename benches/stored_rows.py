"""The rows the GPU benches store, one a line: `PREFIX key=value ... {json}`
(the keys say which process, round or piece; the JSON holds the figures)."""

import json
import sys


def parse(line, prefix):
    """(fields, figures) of a stored row that starts with `prefix` and a
    space; ValueError (with why) when the rest is not such a row."""
    head, payload = line[len(prefix) + 1:].split(" {", 1)
    fields = dict(kv.split("=", 1) for kv in head.split())
    return fields, json.loads("{" + payload)


def read_rounds(paths, prefix, key):
    """{(file, round): {row[key]: figures}} from the rows of `prefix` in
    stored files (a round pairs only runs of its own file); other lines
    are skipped, a broken row ends the run naming its place."""
    rounds = {}
    for f, path in enumerate(paths):
        with open(path) as stored:
            for n, line in enumerate(stored, 1):
                if not line.startswith(prefix + " "):
                    continue
                try:
                    fields, figures = parse(line, prefix)
                    rounds.setdefault((f, fields["round"]), {})[fields[key]] = figures
                except (ValueError, KeyError) as e:
                    sys.exit(f"{path}:{n}: not a {prefix} row ({key}=X round=R {{json}}): {e}")
    return rounds


def worker_result(done, label):
    """The figures of the RESULT line a finished worker (`done`, a
    subprocess.CompletedProcess) printed last, or None after a FAILED line
    (`label`, its exit, its last stderr line): the caller goes on."""
    lines = [l for l in done.stdout.splitlines() if l.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        last = (done.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        print(f"FAILED {label} exit={done.returncode}: {last}", flush=True)
        return None
    return json.loads(lines[-1][len("RESULT "):])


def summary_files(argv, bench):
    """The files after `--summary` in `argv`, or None when it is not there;
    exits with the usage line of `bench` when no file follows it."""
    if "--summary" not in argv:
        return None
    files = argv[argv.index("--summary") + 1:]
    if not files:
        sys.exit(f"usage: {bench} --summary FILE...")
    return files
