#!/usr/bin/env python3
"""Which CPUs slow a given CPU's work when they are busy: the cores a
virtual machine hides. Its /sys topology often shows every vCPU as a core
of its own while the host runs two vCPUs as hyperthreads of one core, and
work on one then slows the other; 2026-12-07's calls 64-66 found one fixed
interpreter loop taking about 10 ms in some training processes and about
18 in most, on the same CPU (docs/footprint.md, twenty-first session).

The measured CPU (default: the highest one, where the examples' main
thread runs) times the examples' calibration loop in its own thread CPU
time (a wait for the CPU does not count; a core shared with busy work
does), while each other CPU in turn runs a spinning process, alternately
spinning and idle, ROUNDS times each.

    python3 benches/cpu_siblings.py [--cpu N|all] [--rounds 5] [--loop 200000]
                                    [--processes N | --series N]

(`--cpu all` measures every CPU in turn: about 0.3 s a pair, a minute on
16 CPUs.)

Prints one SIBLING line per other CPU: the loop's median CPU time with the
spinner busy and idle, their ratio, and the CPUs the spinner saw itself
run on (its affinity held: only that CPU); then SIBLINGS: the CPUs by
ratio, highest first.

`--processes N` asks instead whether the speed belongs to the process: N
fresh interpreters, one after another on the measured CPU, each timing the
loop --rounds times. One PROCESS_SPEED line per process (its median, its
fastest and slowest), then PROCESS_SPEEDS: every process's median, sorted,
and the median spread within a process. Read it with --series: a split
between processes that one process's series shows too is the machine's
moment (on the build machine, 2026-12-07, it was), not the process's.

`--series N` times the loop N times in one process instead: SERIES gives
every timing in order and SERIES_SPEEDS the fast and slow levels (the
10th and 90th percentiles), how many stretches the timings make on either
side of their midpoint, and the longest stretch in seconds. Few long
stretches in one process say the machine's state, not the process, sets
the speed.

Run on the GPU machine by scripts/gpu-footprint-zoo.sh
(SECTIONS=siblings).
"""
import argparse
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time


def cpu_now():
    """The CPU this thread last ran on (stat's field 39)."""
    with open("/proc/thread-self/stat") as f:
        stat = f.read()
    return int(stat[stat.rindex(")") + 2:].split()[36])


def spinner(cpu, spin, stop, report):
    """Busy on `cpu` while `spin` is set, asleep otherwise, until `stop`;
    then reports the CPUs it saw itself on and its own CPU time."""
    os.sched_setaffinity(0, {cpu})
    seen = {cpu_now()}
    while not stop.is_set():
        if spin.wait(0.005):
            deadline = time.monotonic() + 0.002
            while time.monotonic() < deadline:
                pass
            seen.add(cpu_now())
    report.put((sorted(seen), time.thread_time()))


def loop_ms(iterations):
    """The examples' calibration loop (examples/common.py), in this
    thread's CPU time."""
    t = time.thread_time_ns()
    total = 0
    for i in range(iterations):
        total += i * i
    return (time.thread_time_ns() - t) / 1e6


def against(cpu, other, rounds, iterations):
    """The loop on `cpu` with a spinner on `other`, busy and idle
    alternately (idle first in odd rounds): (busy ms, idle ms, the
    spinner's CPUs, its CPU seconds)."""
    ctx = mp.get_context("fork")
    spin, stop, report = ctx.Event(), ctx.Event(), ctx.Queue()
    child = ctx.Process(target=spinner, args=(other, spin, stop, report))
    child.start()
    busy, idle = [], []
    for r in range(rounds):
        for state in ((False, True) if r % 2 == 0 else (True, False)):
            spin.set() if state else spin.clear()
            time.sleep(0.01)  # the spinner wakes, or goes back to sleep
            (busy if state else idle).append(loop_ms(iterations))
    spin.clear()
    stop.set()
    seen, spun = report.get(timeout=30)
    child.join(timeout=30)
    return statistics.median(busy), statistics.median(idle), seen, spun


def measure(cpu, cpus, rounds, iterations):
    """SIBLING lines for `cpu` against each other CPU, then its SIBLINGS."""
    os.sched_setaffinity(0, {cpu})
    others = [c for c in cpus if c != cpu]
    if not others:
        print(f"SIBLINGS cpu={cpu} others=0 by_ratio=none (one CPU: nothing to compare)")
        return
    ratios = {}
    for other in others:
        busy, idle, seen, spun = against(cpu, other, rounds, iterations)
        ratios[other] = busy / idle
        print(f"SIBLING cpu={cpu} with={other} busy_ms={busy:.3f} idle_ms={idle:.3f} "
              f"ratio={busy / idle:.3f} spinner_cpus={','.join(map(str, seen))} spinner_cpu_s={spun:.3f}",
              flush=True)
    ranked = sorted(ratios, key=ratios.get, reverse=True)
    print(f"SIBLINGS cpu={cpu} others={len(others)} by_ratio="
          + ",".join(f"{c}:{ratios[c]:.2f}" for c in ranked), flush=True)


def process_speeds(cpu, processes, rounds, iterations):
    """PROCESS_SPEED lines for `processes` fresh interpreters on `cpu`, then
    PROCESS_SPEEDS."""
    medians, spreads = [], []
    for n in range(processes):
        # This bench's own --series in a fresh interpreter: the same loop.
        out = subprocess.run([sys.executable, __file__, "--cpu", str(cpu), "--series", str(rounds),
                              "--loop", str(iterations)], check=True, capture_output=True, text=True).stdout
        line = next(l for l in out.splitlines() if l.startswith("SERIES "))
        times = [float(t) for t in line.rpartition("ms=")[2].split(",")]
        medians.append(statistics.median(times))
        spreads.append(max(times) - min(times))
        print(f"PROCESS_SPEED cpu={cpu} process={n + 1} loop_ms={medians[-1]:.3f} "
              f"fastest_ms={min(times):.3f} slowest_ms={max(times):.3f}", flush=True)
    print(f"PROCESS_SPEEDS cpu={cpu} processes={processes} rounds={rounds} medians_ms="
          + ",".join(f"{m:.2f}" for m in sorted(medians))
          + f" within_spread_ms={statistics.median(spreads):.3f}", flush=True)


def stretches(times):
    """The runs of consecutive timings on one side of the midpoint between
    the fast and slow levels: (levels, list of (count, seconds))."""
    ordered = sorted(times)
    fast = ordered[len(ordered) // 10]
    slow = ordered[(len(ordered) * 9) // 10]
    midpoint = (fast + slow) / 2
    runs = []
    for t in times:
        side = t > midpoint
        if runs and runs[-1][0] == side:
            runs[-1][1].append(t)
        else:
            runs.append((side, [t]))
    return (fast, slow), [(len(ts), sum(ts) / 1e3) for _, ts in runs]


def series(cpu, timings, iterations):
    """SERIES and SERIES_SPEEDS for `timings` timings in this process."""
    os.sched_setaffinity(0, {cpu})
    times = [loop_ms(iterations) for _ in range(timings)]
    print(f"SERIES cpu={cpu} timings={timings} ms=" + ",".join(f"{t:.3f}" for t in times), flush=True)
    (fast, slow), runs = stretches(times)
    print(f"SERIES_SPEEDS cpu={cpu} timings={timings} fast_ms={fast:.2f} slow_ms={slow:.2f} "
          f"stretches={len(runs)} longest_s={max(s for _, s in runs):.2f}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cpus = sorted(os.sched_getaffinity(0))
    parser.add_argument("--cpu", default=str(cpus[-1]), help="the CPU measured, or `all` (default: the highest)")
    parser.add_argument("--rounds", type=int, default=5, help="busy and idle timings per other CPU, or timings per process under --processes")
    parser.add_argument("--loop", type=int, default=200_000, help="the loop's iterations")
    parser.add_argument("--processes", type=int, default=0,
                        help="fresh interpreters timed one after another instead (0: the sibling search)")
    parser.add_argument("--series", type=int, default=0,
                        help="timings in this one process instead (0: the sibling search)")
    args = parser.parse_args()
    if args.cpu == "all":
        measured = cpus
    elif args.cpu.isdigit() and int(args.cpu) in cpus:
        measured = [int(args.cpu)]
    else:
        sys.exit(f"--cpu {args.cpu}: not a CPU this process may run on ({cpus}), nor `all`")
    if args.rounds < 1 or args.loop < 1 or args.processes < 0 or args.series < 0:
        sys.exit("--rounds and --loop must be at least 1, --processes and --series at least 0")
    if args.processes and args.series:
        sys.exit("--processes and --series: one at a time")
    for cpu in measured:
        if args.series:
            series(cpu, args.series, args.loop)
        elif args.processes:
            process_speeds(cpu, args.processes, args.rounds, args.loop)
        else:
            measure(cpu, cpus, args.rounds, args.loop)


if __name__ == "__main__":
    main()
