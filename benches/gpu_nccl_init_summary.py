"""NCCL's own account of each communicator's creation, run against run:
benches/gpu_overhead.sh keeps every `Init timings` line NCCL writes (NCCL
>= 2.23 at NCCL_DEBUG=INFO, subsystem INIT) from each run's NCCL log, as

    NCCLINIT workload=W allocator=A mode=M round=R comm=K <NCCL's text>

where the text holds `total T (kernels a, alloc b, bootstrap c, ...)` in
seconds with two decimals, and K numbers the process's communicators in the
order NCCL logged them (0: the first, which loads NCCL's kernels). The doctor
turns that log on in every run; mode `nccl-log` is the plain run with the
same log, so its lines are the plain side. This is a part of step 1 timed by
NCCL itself, inside each process: whether the doctor's step-1 extra lies in
a communicator's creation, and in which of NCCL's parts.

Usage: gpu_nccl_init_summary.py WORKLOAD ALLOCATOR FILE...  Prints, for the
cell's rows, one NCCL_INIT line per mode and communicator (medians over its
runs, milliseconds) and, where `nccl-log` ran, one NCCL_INIT_PAIRED line per
other mode: within each round the mode's figures minus `nccl-log`'s, the
median over rounds with the min..max, and in how many rounds it was slower.
A line that is not NCCLINIT is skipped; a NCCLINIT line NCCL's text cannot be
read from is an error naming the file and line.
"""

import re
import statistics
import sys

ROW = re.compile(r"^NCCLINIT workload=(\S+) allocator=(\S+) mode=(\S+) round=(\d+) comm=(\d+) (.*)$")
TOTAL = re.compile(r"total ([0-9.]+) \(([^)]*)\)")
PART = re.compile(r"([a-z]+) ([0-9.]+)")


def parse(text):
    """{'total': ms, part: ms, ...} from NCCL's `Init timings` text, or None."""
    m = TOTAL.search(text)
    if not m:
        return None
    parts = {"total": 1000 * float(m.group(1))}
    for name, value in PART.findall(m.group(2)):
        parts[name] = 1000 * float(value)
    return parts


def read(workload, allocator, files):
    """{(mode, comm): {(file, round): figures}} for the cell's rows: rounds of
    different files (calls) are different rounds, so several calls pool."""
    rows = {}
    for index, path in enumerate(files):
        with open(path) as f:
            for n, line in enumerate(f, 1):
                m = ROW.match(line.rstrip("\n"))
                if not m:
                    continue
                w, a, mode, rnd, comm, text = m.groups()
                if (w, a) != (workload, allocator):
                    continue
                figures = parse(text)
                if figures is None:
                    sys.exit(f"{path}:{n}: no `total T (parts)` in NCCL's Init timings text: {text!r}")
                rows.setdefault((mode, int(comm)), {})[(index, int(rnd))] = figures
    return rows


def ms(v):
    return f"{v:.0f}"


def main(argv):
    if len(argv) < 4:
        sys.exit("usage: gpu_nccl_init_summary.py WORKLOAD ALLOCATOR FILE...")
    workload, allocator, files = argv[1], argv[2], argv[3:]
    rows = read(workload, allocator, files)
    cell = f"workload={workload} allocator={allocator}"
    for (mode, comm), runs in sorted(rows.items()):
        keys = list(next(iter(runs.values())))
        medians = " ".join(f"{k}_ms={ms(statistics.median(r.get(k, 0) for r in runs.values()))}" for k in keys)
        print(f"NCCL_INIT {cell} mode={mode} comm={comm} runs={len(runs)} {medians}")
    for (mode, comm), runs in sorted(rows.items()):
        base = rows.get(("nccl-log", comm))
        if mode == "nccl-log" or base is None:
            continue
        both = sorted(set(runs) & set(base))
        if not both:
            continue
        out = []
        for k in runs[both[0]]:
            diffs = [runs[r].get(k, 0) - base[r].get(k, 0) for r in both]
            out.append(f"{k}_added_ms={ms(statistics.median(diffs))} ({ms(min(diffs))}..{ms(max(diffs))})")
        slower = sum(runs[r]["total"] > base[r]["total"] for r in both)
        print(f"NCCL_INIT_PAIRED {cell} mode={mode} against=nccl-log comm={comm} rounds={len(both)} "
              + " ".join(out) + f" total_slower={slower}/{len(both)}")


if __name__ == "__main__":
    main(sys.argv)
