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
                                    [--processes N | --series N | --grain S | --together S
                                     | --steps N [--work 80]]

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

`--grain S` asks what a slow stretch is, at a finer grain: a short loop
(--loop, 50 iterations here, a few microseconds) timed in wall time over
and over for S seconds, its timings grouped by millisecond. A CPU that
runs the same instructions slower (a busy hyperthread sibling on the host,
a lower clock) makes every timing of a slow millisecond longer; a CPU
taken away (the host runs something else on it) leaves most timings as
they were and a few very long ones, counted apart as gaps. GRAIN gives
the levels (the 10th, 50th and 90th percentiles of the milliseconds'
per-timing means), the share of milliseconds at the slow level, their
stretches and the longest on either side, and the gaps' share of the time; with
`--cpu all`, GRAINS ranks the CPUs by their median level, fastest first
(a CPU slow through the whole run shows one level, a slow one; on the build
machine, 2026-12-07: every slow millisecond's timings about 1.8x longer,
almost no gaps: slower execution, not preemption).

`--together S` asks whether two CPUs are slow at the same moments: the
measured CPU and each other CPU in turn run the `--grain` loop at the same
time for S seconds. TOGETHER gives the pair's levels (one pair for both
CPUs), the stretches each made, both CPUs' slow shares, how often their
milliseconds agree (both slow or both fast) and how often they would if
the two were independent; TOGETHERS ranks the other CPUs by the excess.
The stretches, not the milliseconds, are the samples the agreement rests
on: on the build machine, four runs of 1-2 s read excesses of -0.03 to
+0.24. Runs of two programs at the same time share the machine's moment
only where CPUs agree well beyond independence, run after run.

`--steps N` asks what a calibration just before a step says of it: N
steps of fixed CPU-bound work (--work runs of the loop, about a second,
like fsdp2's step 1), each with the calibration (the loop 5 times, the
median) just before and just after it, as examples/common.py takes
`calib0` and `calib`. One STEP line a step; STEPS gives the steps'
spread, each calibration's rank correlation with the step, and the
spread of log step time before and after taking out what the calibration
before predicts (a least-squares slope on the logs): how much of a
step's spread the examples' `calib0` could take out of the rounds.

Run on the GPU machine by scripts/gpu-footprint-zoo.sh
(SECTIONS=siblings; not --steps, which the rounds' own calib0 answers
there).
"""
import argparse
import array
import math
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
    fast, _, slow = levels_of(times)
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


# The grain's clock (CLOCK_MONOTONIC: one clock for every process, so two
# CPUs' milliseconds line up), its slot, and what counts as a gap: a timing
# this many times the fast level's, the CPU taken away rather than slowed.
SLOT_NS = 1_000_000
GAP_FACTOR = 20
# Below this ratio of the slow level to the fast one there is one level:
# a split at their midpoint would only split noise.
ONE_LEVEL = 1.15


def grain_timings(iterations, seconds, start_ns=None):
    """The short loop timed in wall time over and over for `seconds`
    (after waiting for `start_ns`, when given): (ends, durations) in ns."""
    clock = time.monotonic_ns
    ends, durations = array.array("q"), array.array("q")
    if start_ns is not None:
        while clock() < start_ns:
            pass
    stop = clock() + int(seconds * 1e9)
    while True:
        t = clock()
        total = 0
        for i in range(iterations):
            total += i * i
        end = clock()
        ends.append(end)
        durations.append(end - t)
        if end >= stop:
            return ends, durations


def millisecond_means(ends, durations):
    """The timings by millisecond: the gaps taken out (their durations) and
    each millisecond's per-timing mean (ns)."""
    ordered = sorted(durations)
    gap_over = GAP_FACTOR * ordered[len(ordered) // 10]
    gaps = [d for d in durations if d > gap_over]
    slots = {}
    for end, d in zip(ends, durations):
        if d <= gap_over:
            slot = slots.setdefault(end // SLOT_NS, [0, 0])
            slot[0] += 1
            slot[1] += d
    return gaps, {s: total / n for s, (n, total) in sorted(slots.items())}


def levels_of(means):
    """The fast, median and slow levels (p10, p50, p90) of timings or
    millisecond means."""
    levels = sorted(means)
    return levels[len(levels) // 10], levels[len(levels) // 2], levels[(len(levels) * 9) // 10]


def sides_of(means, fast, slow):
    """Each millisecond's side (slow: above the levels' midpoint); None
    where the levels are one."""
    if slow < ONE_LEVEL * fast:
        return None
    midpoint = (fast + slow) / 2
    return {s: m > midpoint for s, m in means.items()}


def slow_stretches(side):
    """The stretches of consecutive milliseconds on one side: (count, longest ms)."""
    runs, last, longest, length = 0, None, 0, 0
    for s in side.values():
        length = length + 1 if s == last else 1
        runs += s != last
        last, longest = s, max(longest, length)
    return runs, longest


def grain(cpu, seconds, iterations):
    """GRAIN for `cpu`: its levels, slow share, stretches and gaps; returns
    (cpu, median level, slow share or None) for GRAINS."""
    os.sched_setaffinity(0, {cpu})
    ends, durations = grain_timings(iterations, seconds)
    gaps, means = millisecond_means(ends, durations)
    fast, middle, slow = levels_of(means.values())
    side = sides_of(means, fast, slow)
    wall = ends[-1] - (ends[0] - durations[0])
    if side is None:
        shape = "slow_share=none stretches=none longest_ms=none"
        share = None
    else:
        runs, longest = slow_stretches(side)
        share = sum(side.values()) / len(side)
        shape = f"slow_share={share:.3f} stretches={runs} longest_ms={longest}"
    print(f"GRAIN cpu={cpu} seconds={wall / 1e9:.2f} loop={iterations} timings={len(durations)} "
          f"fast_us={fast / 1e3:.3f} median_us={middle / 1e3:.3f} slow_us={slow / 1e3:.3f} "
          f"levels_ratio={slow / fast:.2f} {shape} gaps={len(gaps)} gap_share={sum(gaps) / wall:.4f}", flush=True)
    return cpu, middle, share


def grains_line(found):
    """GRAINS: the CPUs measured, fastest first by their median level (a CPU
    slow through the whole run has one level too, a slow one), each with
    its median (us) and slow share."""
    ranked = sorted(found, key=lambda f: f[1])
    print(f"GRAINS cpus={len(found)} fastest_first="
          + ",".join(f"{c}:{m / 1e3:.2f}/{'none' if s is None else f'{s:.2f}'}" for c, m, s in ranked),
          flush=True)


def ranked_correlation(xs, ys):
    """Spearman's rho (Pearson's on the ranks; timings do not tie)."""
    def ranks(v):
        order = sorted(range(len(v)), key=v.__getitem__)
        r = [0] * len(v)
        for rank, i in enumerate(order):
            r[i] = rank
        return r
    return statistics.correlation(ranks(xs), ranks(ys))


def calibrated_steps(cpu, steps, work, iterations):
    """STEP lines for `steps` steps of `work` loops on `cpu`, each between
    two calibrations, then STEPS."""
    os.sched_setaffinity(0, {cpu})
    rows = []
    for n in range(steps):
        before = statistics.median(loop_ms(iterations) for _ in range(5))
        t = time.thread_time_ns()
        for _ in range(work):
            loop_ms(iterations)
        step = (time.thread_time_ns() - t) / 1e6
        after = statistics.median(loop_ms(iterations) for _ in range(5))
        rows.append((before, step, after))
        print(f"STEP cpu={cpu} step={n + 1} before_ms={before:.3f} step_ms={step:.3f} after_ms={after:.3f}",
              flush=True)
    before, step, after = (list(column) for column in zip(*rows))
    logs, log_before = [math.log(v) for v in step], [math.log(v) for v in before]
    slope = statistics.linear_regression(log_before, logs).slope
    adjusted = [y - slope * x for x, y in zip(log_before, logs)]
    print(f"STEPS cpu={cpu} steps={steps} work={work} step_ms={min(step):.1f}/{statistics.median(step):.1f}/"
          f"{max(step):.1f} rho_before={ranked_correlation(before, step):.2f} "
          f"rho_after={ranked_correlation(after, step):.2f} log_sd={statistics.stdev(logs):.4f} "
          f"log_sd_adjusted={statistics.stdev(adjusted):.4f} slope={slope:.2f}", flush=True)


def agreement(a, b):
    """Two CPUs' sides (millisecond -> slow) lined up over the milliseconds
    both have: (their number, each one's slow share, how often they agree,
    how often independent CPUs with those shares would); None where either
    has one level or they share no millisecond."""
    common = sorted(set(a or {}) & set(b or {}))
    if a is None or b is None or not common:
        return None
    pa = sum(a[s] for s in common) / len(common)
    pb = sum(b[s] for s in common) / len(common)
    agree = sum(a[s] == b[s] for s in common) / len(common)
    return len(common), pa, pb, agree, pa * pb + (1 - pa) * (1 - pb)


def grain_child(cpu, iterations, seconds, start_ns, report):
    """One side of a TOGETHER pair: the grain loop on `cpu` from `start_ns`."""
    os.sched_setaffinity(0, {cpu})
    ends, durations = grain_timings(iterations, seconds, start_ns)
    report.put((cpu, ends.tobytes(), durations.tobytes()))


def together(cpu, cpus, seconds, iterations):
    """TOGETHER lines for `cpu` with each other CPU at the same moments,
    then TOGETHERS."""
    others = [c for c in cpus if c != cpu]
    excess = {}
    ctx = mp.get_context("fork")
    for other in others:
        report = ctx.Queue()
        start_ns = time.monotonic_ns() + 200_000_000  # both children started and pinned
        children = [ctx.Process(target=grain_child, args=(c, iterations, seconds, start_ns, report))
                    for c in (cpu, other)]
        for child in children:
            child.start()
        means = {}
        for _ in children:
            c, ends, durations = report.get(timeout=60 + seconds)
            means[c] = millisecond_means(array.array("q", ends), array.array("q", durations))[1]
        for child in children:
            child.join(timeout=30)
        # One pair of levels for both CPUs (the same loop on one machine): a
        # CPU slow throughout is slow against the other's fast milliseconds.
        fast, _, slow = levels_of(list(means[cpu].values()) + list(means[other].values()))
        line = (f"TOGETHER cpu={cpu} with={other} seconds={seconds:g} fast_us={fast / 1e3:.3f} "
                f"slow_us={slow / 1e3:.3f} ")
        a, b = sides_of(means[cpu], fast, slow), sides_of(means[other], fast, slow)
        lined_up = agreement(a, b)
        if lined_up is None:
            print(line + "slow_share=none agree=none independent=none excess=none "
                  "(one level on both: nothing to line up)", flush=True)
            continue
        common, pa, pb, agree, independent = lined_up
        excess[other] = agree - independent
        # Stretches, not milliseconds, are what the agreement rests on.
        print(line + f"milliseconds={common} stretches={slow_stretches(a)[0]},{slow_stretches(b)[0]} "
              f"slow_share={pa:.3f},{pb:.3f} agree={agree:.3f} "
              f"independent={independent:.3f} excess={agree - independent:+.3f}", flush=True)
    ranked = sorted(excess, key=excess.get, reverse=True)
    print(f"TOGETHERS cpu={cpu} others={len(others)} by_excess="
          + (",".join(f"{c}:{excess[c]:+.2f}" for c in ranked) or "none"), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cpus = sorted(os.sched_getaffinity(0))
    parser.add_argument("--cpu", default=str(cpus[-1]), help="the CPU measured, or `all` (default: the highest)")
    parser.add_argument("--rounds", type=int, default=5, help="busy and idle timings per other CPU, or timings per process under --processes")
    parser.add_argument("--loop", type=int, default=None,
                        help="the loop's iterations (default 200000; 50 under --grain and --together)")
    parser.add_argument("--processes", type=int, default=0,
                        help="fresh interpreters timed one after another instead (0: the sibling search)")
    parser.add_argument("--series", type=int, default=0,
                        help="timings in this one process instead (0: the sibling search)")
    parser.add_argument("--grain", type=float, default=0,
                        help="seconds of a short loop's timings by millisecond instead (0: the sibling search)")
    parser.add_argument("--together", type=float, default=0,
                        help="seconds of the --grain loop on the measured CPU and each other CPU at once instead")
    parser.add_argument("--steps", type=int, default=0,
                        help="steps of fixed work between two calibrations each instead (0: the sibling search)")
    parser.add_argument("--work", type=int, default=80, help="the loop runs a --steps step does")
    args = parser.parse_args()
    fine = args.grain or args.together
    if args.loop is None:
        args.loop = 50 if fine else 200_000
    if args.cpu == "all":
        measured = cpus
    elif args.cpu.isdigit() and int(args.cpu) in cpus:
        measured = [int(args.cpu)]
    else:
        sys.exit(f"--cpu {args.cpu}: not a CPU this process may run on ({cpus}), nor `all`")
    if args.rounds < 1 or args.loop < 1 or args.work < 1 or min(args.processes, args.series, args.steps) < 0:
        sys.exit("--rounds, --loop and --work must be at least 1, --processes, --series and --steps at least 0")
    if args.steps == 1 or args.steps == 2:
        sys.exit("--steps: 3 at least (a correlation of fewer says nothing)")
    if not (args.grain >= 0 and args.together >= 0):  # NaN fails too
        sys.exit("--grain and --together: seconds, at least 0")
    modes = [f"--{m}" for m in ("processes", "series", "grain", "together", "steps") if getattr(args, m)]
    if len(modes) > 1:
        sys.exit(f"{' and '.join(modes)}: one at a time")
    found = []
    for cpu in measured:
        if args.series:
            series(cpu, args.series, args.loop)
        elif args.processes:
            process_speeds(cpu, args.processes, args.rounds, args.loop)
        elif args.grain:
            found.append(grain(cpu, args.grain, args.loop))
        elif args.together:
            together(cpu, cpus, args.together, args.loop)
        elif args.steps:
            calibrated_steps(cpu, args.steps, args.work, args.loop)
        else:
            measure(cpu, cpus, args.rounds, args.loop)
    if len(found) > 1:
        grains_line(found)


if __name__ == "__main__":
    main()
