#!/usr/bin/env python3
"""How many alternated rounds a footprint target needs, were the doctor's
true cost a given ratio: a plan for the GPU calls, read off the stored
rounds' own noise.

The stored rounds' paired ratios (the doctor's figure over plain's, within
a round, as benches/gpu_overhead_summary.py pairs them) are centred on 1
by their median, then N of them are drawn with replacement and scaled by
the cost; each draw is judged as the summary's TARGET judges (the exact
interval of benches/exact_interval.py): `met` when the interval's top is
within the limit, `over` when its bottom is above it. The share of draws
that say `met` is the chance N rounds resolve the target at that cost, on
rounds as noisy as the stored ones (taken as exchangeable: the same machine
and workload, drawn at random; 20 stored rounds at least).

    python3 benches/rounds_needed.py [--key step1|steady_median] [--mode doctor]
        [--limit 1.03] [--costs 1.0,1.01,1.02] [--rounds 50,100,200,400]
        [--draws 500] STEPTIMES-FILE...

Prints STORED (the rounds read, their median ratio and exact interval)
and one ROUNDS_NEEDED line per cost and round count. The draws are
seeded: the same files give the same lines.
"""
import argparse
import json
import random
import statistics
import sys

from exact_interval import median_interval

# The targets of issue 37 (docs/footprint.md): step 1 and the steady step.
LIMITS = {"step1": 1.03, "steady_median": 1.01}
# Draws from fewer stored rounds repeat a dozen values: near the median
# their gaps, not the noise, decide the interval (fsdp2 async's 12 rounds
# gave the same 3-4% `met` at 100, 200 and 400 rounds).
MIN_STORED = 20
# Figures a pooled round must share (benches/gpu_overhead_summary.py's SHAPE).
SHAPE = ("steps", "hidden", "batch", "allocator", "workload", "cut_step1")


def paired_ratios(paths, mode, key):
    """The mode's figure over plain's in every stored round where both ran
    (a round pairs only runs of its own file); exits naming the file where
    rows mix shapes or repeat a run."""
    runs, shape, seen = {}, {}, set()
    for f, path in enumerate(paths):
        with open(path) as stored:
            for n, line in enumerate(stored, 1):
                kind, sep, payload = line.partition(" STEPTIMES ")
                if not sep:
                    continue
                if line in seen:
                    sys.exit(f"{path}:{n}: a run already read (each call's rounds are pooled once)")
                seen.add(line)
                name, _, tag = kind.strip().partition(" round=")
                try:
                    row = json.loads(payload)
                except json.JSONDecodeError as e:
                    sys.exit(f"{path}:{n}: not a STEPTIMES row: {e}")
                for k in SHAPE:
                    value = row.get(k, 0 if k == "cut_step1" else None)
                    if value is not None and shape.setdefault(k, value) != value:
                        sys.exit(f"{path}:{n}: {k}={value!r}, but earlier rows have {shape[k]!r}: "
                                 "pool only rounds of one shape")
                runs.setdefault((f, tag), {})[name] = row
    return [r[mode][key] / r["plain"][key] for r in runs.values()
            if mode in r and "plain" in r and key in r[mode] and key in r["plain"]]


def ranks(n):
    """The exact interval's order statistics for n rounds (0-based)."""
    lo, hi, _ = median_interval(list(range(n)))
    return lo, hi


def chances(ratios, cost, n, limit, draws, rng):
    """Shares of `draws` draws of n centred ratios scaled by `cost` whose
    interval says met and over."""
    centre = statistics.median(ratios)
    centred = [r / centre * cost for r in ratios]
    lo, hi = ranks(n)
    met = over = 0
    for _ in range(draws):
        drawn = sorted(rng.choices(centred, k=n))
        met += drawn[hi] <= limit
        over += drawn[lo] > limit
    return met / draws, over / draws


def numbers(text, flag, kind):
    """A comma list of `kind` (a flag's value), or exit naming the flag."""
    try:
        return [kind(v) for v in text.split(",")]
    except ValueError:
        sys.exit(f"{flag} {text}: not a comma list of numbers")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--key", default="step1", help="the STEPTIMES figure (step1, steady_median)")
    parser.add_argument("--mode", default="doctor", help="the mode against plain")
    parser.add_argument("--limit", type=float, default=None, help="the target (default: the key's)")
    parser.add_argument("--costs", default="1.0,1.01,1.02", help="true costs to try, as ratios")
    parser.add_argument("--rounds", default="50,100,200,400", help="round counts to try (5 or more)")
    parser.add_argument("--draws", type=int, default=500, help="draws for each cost and count")
    parser.add_argument("files", nargs="+", help="STEPTIMES files (a cell's, pooled)")
    args = parser.parse_args()
    limit = args.limit if args.limit is not None else LIMITS.get(args.key)
    if limit is None:
        sys.exit(f"--key {args.key}: no target known for it; give --limit")
    costs = numbers(args.costs, "--costs", float)
    counts = numbers(args.rounds, "--rounds", int)
    if min(counts) < 5 or args.draws < 1:
        sys.exit("--rounds: 5 or more each (no exact interval below); --draws: at least 1")
    ratios = paired_ratios(args.files, args.mode, args.key)
    if len(ratios) < MIN_STORED:
        sys.exit(f"{len(ratios)} stored rounds pair {args.mode} with plain on {args.key}: draws from so few "
                 f"values plan nothing ({MIN_STORED} at least)")
    lo, hi, coverage = median_interval(ratios)
    print(f"STORED key={args.key} mode={args.mode} rounds={len(ratios)} ratio={statistics.median(ratios):.4f} "
          f"ratio_90={lo:.4f}-{hi:.4f} coverage={coverage:.3f} limit={limit}", flush=True)
    rng = random.Random(0)
    for cost in costs:
        for n in counts:
            met, over = chances(ratios, cost, n, limit, args.draws, rng)
            print(f"ROUNDS_NEEDED key={args.key} cost={cost:g} rounds={n} met={met:.3f} over={over:.3f} "
                  f"draws={args.draws}", flush=True)


if __name__ == "__main__":
    main()
