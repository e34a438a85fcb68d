#!/usr/bin/env python3
"""The phase ends whose account is out of its bounds, from `prewarm-doctor
report --format json` files: a remainder below -16 MiB (the parts add up to
more than the device showed: a figure is off) or flagged not understood
(above 64 MiB: memory no record explains). Read on the GPU machine after
each run, so that a report is read for its account and not only for the
figure a call was after (scripts/gpu-footprint-zoo.sh's verify).

Usage: account_flags.py NAME REPORT.json...   Prints one ACCOUNT_FLAG line
per phase end out of bounds and an ACCOUNT_FLAGS line with their count."""
import json
import sys

OVER_EXPLAINED_BYTES = 16 << 20  # src/analysis/account.rs OVER_EXPLAINED_BYTES


def flags(report):
    """(attempt, pid, phase, unexplained bytes, what) for each phase end out of bounds."""
    out = []
    for attempt in report.get("attempts", []):
        label = f"{attempt.get('variant')}#{attempt.get('attempt')}"
        for process in attempt.get("processes", []):
            for phase in process.get("phases", []):
                gap = phase.get("gap_end")
                if not gap:
                    continue
                if gap["not_understood"]:
                    what = "not understood"
                elif gap["unexplained"] < -OVER_EXPLAINED_BYTES:
                    what = "over-explained"
                else:
                    continue
                out.append((label, process.get("pid"), phase.get("phase"), gap["unexplained"], what))
    return out


def main(argv):
    if len(argv) < 3:
        print(__doc__.split("\n\n")[-1], file=sys.stderr)
        return 2
    name, total = argv[1], 0
    for path in argv[2:]:
        try:
            with open(path) as f:
                report = json.load(f)
        except (OSError, ValueError) as e:
            print(f"account_flags.py: cannot read {path}: {e}", file=sys.stderr)
            return 1
        for label, pid, phase, unexplained, what in flags(report):
            total += 1
            print(f"ACCOUNT_FLAG {name} attempt={label} pid={pid} phase={phase} "
                  f"unexplained_mib={unexplained / (1 << 20):.1f} {what}")
    print(f"ACCOUNT_FLAGS {name} {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
