#!/usr/bin/env python3
"""Prints the account figures issue 15 checks, from `prewarm-doctor report RUN
--format json` (read from a file or stdin):

  per attempt and rank: the remainder (unexplained) at every phase end beside
  the device used there, the tightest step-1 headroom beside the step-1
  device peak, and the smallest device every request fits on;
  per verdict: the class, the charged memory cost (held_extra) beside the
  total's change at step-1 end (device used - pool) with its noise, and the
  split by source that explains it.

Exit status 1 when a phase end is over-explained (remainder below
-16 MiB, or above 64 MiB without the not-understood flag) or a charge exceeds the total's change plus
its noise: what scripts/gpu-verify-account.sh checks on fresh GPU recordings.

Usage: scripts/account_summary.py REPORT.json [LABEL]
"""

import json
import sys

MIB = float(1 << 20)


def mib(b):
    return "?" if b is None else f"{b / MIB:.1f}"


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "-"
    label = sys.argv[2] if len(sys.argv) > 2 else path
    doc = json.load(sys.stdin if path == "-" else open(path))
    bad = []
    for a in doc.get("attempts", []):
        for p in a.get("processes", []):
            if p.get("context_bytes") is None:
                continue
            rems = []
            for ph in p.get("phases", []):
                g = ph.get("gap_end")
                if g is None:
                    rems.append(f"{ph['phase']} ?")
                    continue
                rems.append(f"{ph['phase']} {mib(g['unexplained'])}/{mib(g['device_used'])}")
                if g["unexplained"] < -16 * MIB or (g["unexplained"] > 64 * MIB and not g.get("not_understood")):
                    bad.append(f"{a['variant']}/{a['attempt']} pid {p['pid']} {ph['phase']}: over-explained by {mib(-g['unexplained'])} MiB")
            step1 = [ph for ph in p.get("phases", []) if ph["phase"] == "step1"]
            peak = step1[0].get("device_used_peak") if step1 else None
            tight = [t for t in p.get("tightest", []) if t["phase"] == "step1" and t.get("headroom_after") is not None]
            tight = min(tight, key=lambda t: t["headroom_after"]) if tight else None
            tight_text = "none"
            if tight:
                tight_text = (f"{mib(tight['headroom_after'])} MiB left after {tight['kind']} {tight['what'][:40]} "
                              f"of {mib(tight['bytes'])} MiB (this process before: {mib(tight.get('process_used_before'))} MiB)")
            print(f"{label} {a['variant']}/{a['attempt']} rank {p.get('rank')} pid {p['pid']}")
            print(f"   remainder/device used at phase ends (MiB): {'; '.join(rems)}")
            print(f"   step-1 device peak {mib(peak)} MiB; tightest step-1 headroom: {tight_text}")
            print(f"   smallest device every request fits on: {mib(p.get('min_capacity_bytes'))} MiB ({p.get('memory_source')})")
    m = doc.get("matrix")
    for v in (m or {}).get("verdicts", []):
        c = v["costs"]
        t = c.get("held_total_step1_end")
        total = "unknown" if t is None else f"{t['delta'] / MIB:+.1f} MiB ({t['outcome']}, noise {mib(t['noise'])} MiB)"
        split = ", ".join(f"{h['source'].get('name') or h['source']['kind']} {h['delta'] / MIB:+.1f}"
                          for h in (c.get("held_step1_end") or []) if abs(h["delta"]) > 4 * MIB)
        print(f"{label} VERDICT {v['variant']}: {v['class']}; charged {mib(c['held_extra'])} MiB; "
              f"total held at step-1 end {total}; by source: {split or '-'}")
        if t is not None and c["held_extra"] > max(0.0, t["delta"]) + t["noise"]:
            bad.append(f"verdict {v['variant']}: charged {mib(c['held_extra'])} MiB > total change {mib(t['delta'])} + noise")
    for b in bad:
        print(f"{label} PROBLEM {b}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
