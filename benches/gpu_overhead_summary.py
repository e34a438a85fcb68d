#!/usr/bin/env python3
"""The summary of benches/gpu_overhead.sh: OVERHEAD, SPREAD, INTERVAL,
PAIRED, SIGN, ORDER, SPEED, ISSUE, PROCESS, THREADS, PART, PART_PAIRED, WORK, COUNTERS, TARGET, STATE, PLACEMENT, CONTROL, DETACH_PAIRED and
BREAKDOWN lines from the STEPTIMES rows of
one or more calls. Several files pool their rounds (a round pairs only runs
of its own file), so a target one 10-minute call cannot resolve can be read
over the rounds of several:

    python3 benches/gpu_overhead_summary.py lazy async 0 call1/steptimes-lazy-async.txt call2/steptimes-lazy-async.txt
"""
import json, math, random, statistics, sys
from exact_interval import median_interval, paired_text, sign_test_p
from exact_interval import paired as exact_paired
if len(sys.argv) < 5:
    sys.exit("usage: gpu_overhead_summary.py WORKLOAD ALLOCATOR BREAKDOWN(0|1) STEPTIMES-FILE...")
workload, allocator, breakdown, files = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
# cut_step1: 1 where the examples' step 1 was cut into parts (a synchronise
# at each cut: another step 1 than an uncut one's); rows without it are 0.
SHAPE = ("steps", "hidden", "batch", "allocator", "workload", "cut_step1")
SHAPE_DEFAULT = {"cut_step1": 0}
# Past this many rounds (about ten sessions' device time for the lazy
# workload) a plan for the next calls is no plan.
MAX_PLANNED_ROUNDS = 1000
# The target's added-time clause (<= 30 us a steady step) is for a GPU-bound
# steady step, where whole processes agree to 1%: the shapes known to be one
# (the lazy bench at --batch 65536, a 20 ms step; the gemm shape). Any other
# workload's clause is not judged, rather than read as over or met.
GPU_BOUND = {"lazy": lambda row: (row.get("batch") or 0) >= 65536, "gemm": lambda row: True}
shapes = {key: {} for key in SHAPE}  # key -> value -> the first file with it
rows = {}
rounds = {}  # (file, round) -> mode -> row, for the paired ratios
first_seen = {}  # a STEPTIMES line -> the file it was first read from
position = {}  # (file, round) -> mode -> its row's place in the file (the run order)
for f, path in enumerate(files):
    per_file = {}
    for line in open(path):
        if " STEPTIMES " not in line:
            continue
        # Measured times never repeat: the same line twice is the same run
        # (a file given twice, or copied into another call's folder).
        if line in first_seen:
            sys.exit(f"the same run is in {first_seen[line]} and {path}: "
                     "each call's rounds must be pooled once")
        first_seen[line] = path
        kind, _, payload = line.partition(" STEPTIMES ")
        mode, _, tag = kind.strip().partition(" round=")
        row = json.loads(payload)
        rows.setdefault(mode, []).append(row)
        for key in SHAPE:
            value = row.get(key, SHAPE_DEFAULT.get(key))
            if value is not None:
                shapes[key].setdefault(value, path)
        per_file[mode] = per_file.get(mode, 0) + 1
        # Files without round tags pair by position: the k-th row of each
        # mode. Rounds of different files (calls) never pair with each other.
        rounds.setdefault((f, tag or str(per_file[mode])), {})[mode] = row
        position.setdefault((f, tag or str(per_file[mode])), {})[mode] = len(first_seen)
# Pooled rounds must be of one workload shape: a ratio over runs of different
# step counts, sizes or allocators would compare nothing. (Rows of older
# files lack hidden/batch: only figures both rows have are compared.)
for key, seen in shapes.items():
    if len(seen) > 1:
        sys.exit(f"the STEPTIMES rows mix runs of different {key}: "
                 + ", ".join(f"{v} ({p})" for v, p in seen.items())
                 + "; pool only calls of one shape")
def paired_values(a, b, key, combine):
    return [combine(r[a][key], r[b][key]) for r in rounds.values() if a in r and b in r]
def paired(a, b, key, combine=lambda x, y: x / y):
    """Within each round where both ran, combine(a's figure, b's): the
    median over rounds, its exact interval (median_interval; NaN with fewer
    than 5 rounds) and the count. TARGET is judged on these."""
    values = paired_values(a, b, key, combine)
    found = median_interval(values)
    lo, hi = (found[0], found[1]) if found else (float("nan"), float("nan"))
    return statistics.median(values), lo, hi, len(values)
def paired_bootstrap(a, b, key, combine=lambda x, y: x / y):
    """The 90% bootstrap interval of the same median (fixed seed): what the
    measurements before 2026-12-04 gave (docs/footprint.md's history); it
    is narrower than the exact one on few rounds, so no verdict rests on it."""
    values = paired_values(a, b, key, combine)
    rng = random.Random(1)
    boot = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(2000))
    return boot[100], boot[1899]
def rank_sum_p(a, b):
    """Two-sided p of the Wilcoxon rank-sum (Mann-Whitney) test that a and b
    come from one distribution, by its normal approximation (ties get
    their mean rank): NaN with fewer than 2 values on a side."""
    n1, n2 = len(a), len(b)
    if n1 < 2 or n2 < 2:
        return float("nan")
    ranked = sorted((v, side) for side, vs in ((0, a), (1, b)) for v in vs)
    ranks, i = [0.0] * len(ranked), 0
    while i < len(ranked):
        j = i
        while j + 1 < len(ranked) and ranked[j + 1][0] == ranked[i][0]:
            j += 1
        for k in range(i, j + 1):
            ranks[k] = (i + j) / 2 + 1
        i = j + 1
    u = sum(r for r, (_, side) in zip(ranks, ranked) if side == 0) - n1 * (n1 + 1) / 2
    z = (u - n1 * n2 / 2) / math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12)
    return math.erfc(abs(z) / math.sqrt(2))
def order_line(mode):
    """ORDER: the mode's ratios to plain split by whether it ran before
    plain in its round (the bench rotates the order; pooled calls need not
    balance it): the medians of each side and the rank-sum p of their
    difference, so a step-1 extra that is only the run order shows."""
    sides = {True: {"step1": [], "steady_median": []}, False: {"step1": [], "steady_median": []}}
    for key, r in rounds.items():
        if mode in r and "plain" in r:
            first = position[key][mode] < position[key]["plain"]
            for k in sides[first]:
                sides[first][k].append(r[mode][k] / r["plain"][k])
    def text(k):
        b, a = sides[True][k], sides[False][k]
        m = lambda v: f"{statistics.median(v):.3f}" if v else "nan"
        return f"{k.split('_')[0]}_before={m(b)} {k.split('_')[0]}_after={m(a)} {k.split('_')[0]}_order_p={rank_sum_p(b, a):.3f}"
    print(f"ORDER workload={workload} allocator={allocator} mode={mode} "
          f"before_plain={len(sides[True]['step1'])} after_plain={len(sides[False]['step1'])} "
          f"{text('step1')} {text('steady_median')}")
def speed_line(mode):
    """SPEED: each run's step 1 over its own steady step, the mode's over
    plain's within rounds (median, exact interval, sign test), and
    Spearman's rho of the rounds' step-1 ratios against their steady ratios.
    Where the steady step is CPU-bound (fsdp2's: its main thread's and
    autograd's CPU), how fast a process's CPU runs is in both of its figures
    and cancels, so this reads step 1's own extra apart from the two
    processes' speeds; where the GPU paces the steady step (lazy's, hf's) it
    does not. A diagnostic of where the extra lies, never the target: TARGET
    judges step 1 against plain's step 1."""
    step1 = paired_values(mode, "plain", "step1", lambda x, y: x / y)
    steady = paired_values(mode, "plain", "steady_median", lambda x, y: x / y)
    ratios = [a / b for a, b in zip(step1, steady)]
    median, lo, hi, coverage, slower, moved, p = exact_paired([x - 1 for x in ratios])
    print(f"SPEED workload={workload} allocator={allocator} mode={mode} rounds={len(ratios)} "
          f"step1_by_steady_ratio={1 + median:.4f} step1_by_steady_ratio_90={1 + lo:.3f}-{1 + hi:.3f} "
          f"coverage={coverage:.3f} slower={slower}/{moved} p={p:.4f} "
          f"step1_vs_steady_ratio_rho={rank_correlation(step1, steady):.2f}")
def med(kind, key):
    return statistics.median(r[key] for r in rows[kind])
def step1_parts(every):
    """The step-1 part keys (``step1_<part>``) every row has: lazy's whole
    forward first (its line's place before the forward was halved), then
    the rest in the first row's order."""
    keys = [k for k in every[0] if k.startswith("step1_") and all(k in r for r in every)]
    return sorted(keys, key=lambda k: k != "step1_forward")
# The windows' figures (examples/common.py's StepWindows; rows since
# 2026-12-07's nineteenth session), per step of step 1's window (`first_`)
# and of the steady steps' (`steady_`): the main thread's CPU and run-queue
# wait (ms), its switches, the other threads' CPU (ms); over the window, the
# machine's busy CPUs and the main thread's CPU's hyperthread siblings'
# busy share. Each window goes with the time it explains.
WINDOW = (("main_cpu", "main_cpu_ms", 1000, "us"), ("main_wait", "main_wait_ms", 1000, "us"),
          ("invol", "invol_switches", 1, "n"), ("vol", "vol_switches", 1, "n"),
          ("others_cpu", "others_cpu_ms", 1000, "us"), ("busy_cpus", "busy_cpus", 1, "n"),
          ("sibling_busy", "sibling_busy", 1, "n"),
          # The main thread's retired instructions and cycles a step, in
          # millions (examples/thread_counters.py), where the machine counts them.
          ("instructions", "main_instructions", 1e-6, "M"), ("cycles", "main_cycles", 1e-6, "M"))
WINDOWS = (("first", "step1"), ("steady", "steady_median"))
# The calibration (examples/common.py's `calibration`, after the last step,
# and since the twenty-first session also before step 1: `calib0`): the main
# thread's CPU time for a fixed interpreter loop and a fixed copy. Each read
# as a window of its own, against both times.
CALIB_WINDOWS = ("calib0", "calib")
CALIB = (("python", "python_ms", 1000, "us"), ("memory", "memory_ms", 1000, "us"),
         ("python_instructions", "python_instructions", 1e-6, "M"))
def has_window(mode, window, figures=WINDOW):
    key = f"{window}_{figures[0][1]}"
    return all(r.get(key) is not None for r in rows[mode] + rows["plain"])
def process_lines(mode, window, pairs, figures=WINDOW):
    """PROCESS: each figure of the window, the mode's against plain's within
    rounds (medians, paired added, exact interval, sign test); THREADS: the
    thread names whose CPU a step of the window the mode adds most (a name
    absent from a run counts 0 there), at most 8."""
    shown = []
    for name, suffix, scale, unit in figures:
        key = f"{window}_{suffix}"
        if not all(r.get(key) is not None for r in rows[mode] + rows["plain"]):
            continue
        diffs = paired_values(mode, "plain", key, lambda x, y: scale * (x - y))
        median, lo, hi, _, slower, moved, _ = exact_paired(diffs)
        d = {"us": 1, "M": 3}.get(unit, 2)
        per = {"us": "_ms", "M": "_M"}.get(unit, "")
        shown_scale = scale if unit == "M" else 1  # medians in the unit they are read in
        shown.append(f"{name}_plain{per}={shown_scale * med('plain', key):.3f} "
                     f"{name}_{mode}{per}={shown_scale * med(mode, key):.3f} "
                     f"{name}_added_{unit}={median:.{d}f} {name}_added_{unit}_90={lo:.{d}f}..{hi:.{d}f} "
                     f"{name}_slower={slower}/{moved}")
    print(f"PROCESS workload={workload} allocator={allocator} mode={mode} window={window} "
          f"rounds={pairs} " + " ".join(shown))
    threads = f"{window}_threads_ms"
    names = sorted({n for r in rows[mode] + rows["plain"] for n in (r.get(threads) or {})})
    added = []
    for n in names:
        diffs = paired_values(mode, "plain", threads,
                              lambda x, y: 1000 * ((x or {}).get(n, 0) - (y or {}).get(n, 0)))
        added.append((statistics.median(diffs), n, diffs))
    for median, n, diffs in sorted(added, key=lambda a: -abs(a[0]))[:8]:
        print(f"THREADS workload={workload} allocator={allocator} mode={mode} window={window} thread={n!r} "
              + paired_text(diffs, "us", 1))
def rank_correlation(xs, ys):
    """Spearman's rho (ties get their mean rank): NaN with fewer than 3
    pairs or a constant side."""
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r, i = [0.0] * len(v), 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
                j += 1
            for k in range(i, j + 1):
                r[order[k]] = (i + j) / 2
            i = j + 1
        return r
    if len(xs) < 3:
        return float("nan")
    rx, ry = ranks(xs), ranks(ys)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx, syy = sum((a - mx) ** 2 for a in rx), sum((b - my) ** 2 for b in ry)
    return sxy / math.sqrt(sxx * syy) if sxx and syy else float("nan")
def state_line(window, timed, figures=WINDOW):
    """STATE: over every process of every mode, how each figure of the
    window ranks with the time it goes with (Spearman's rho): what a
    process whose step 1 or steady steps run slower does differently,
    whichever side it ran."""
    every = [r for kind in rows.values() for r in kind if r.get(f"{window}_{figures[0][1]}") is not None]
    shown = []
    for name, suffix, _, _ in figures:
        pairs = [(r[timed], r[f"{window}_{suffix}"]) for r in every if r.get(f"{window}_{suffix}") is not None]
        if pairs:
            rho = rank_correlation([a for a, _ in pairs], [b for _, b in pairs])
            shown.append(f"{timed}_vs_{name}_rho={rho:.2f}")
    print(f"STATE workload={workload} allocator={allocator} window={window} processes={len(every)} "
          + " ".join(shown))
def spread(kind, key):
    """Run-to-run spread (min-max over rounds, ms): a ratio inside it is noise."""
    v = [1000 * r[key] for r in rows[kind]]
    return f"{min(v):.3f}-{max(v):.3f}"
def overhead_lines(mode):
    """OVERHEAD (the medians' ratios, unpaired), SPREAD and INTERVAL: how
    far the median ratio can move by chance alone, a bootstrap over the
    rounds (each side resampled on its own; 90% interval, fixed seed)."""
    steady = med(mode, "steady_median") / med("plain", "steady_median")
    step1 = med(mode, "step1") / med("plain", "step1")
    mem = med(mode, "device_used") - med("plain", "device_used")
    print(f"OVERHEAD workload={workload} allocator={allocator} mode={mode} rounds={len(rows[mode])} steady_ratio={steady:.4f} "
          f"step1_ratio={step1:.4f} device_used_diff_bytes={mem:.0f} plain_steady_ms={1000*med('plain','steady_median'):.3f} "
          f"{mode}_steady_ms={1000*med(mode,'steady_median'):.3f} plain_step1_ms={1000*med('plain','step1'):.1f} "
          f"{mode}_step1_ms={1000*med(mode,'step1'):.1f}")
    print(f"SPREAD workload={workload} allocator={allocator} mode={mode} plain_steady_ms={spread('plain','steady_median')} "
          f"{mode}_steady_ms={spread(mode,'steady_median')} plain_step1_ms={spread('plain','step1')} "
          f"{mode}_step1_ms={spread(mode,'step1')}")
    def interval(key):
        rng = random.Random(1)
        a = [r[key] for r in rows[mode]]
        b = [r[key] for r in rows["plain"]]
        ratios = sorted(statistics.median(rng.choices(a, k=len(a))) / statistics.median(rng.choices(b, k=len(b)))
                        for _ in range(2000))
        return ratios[100], ratios[1899]
    lo1, hi1 = interval("step1")
    los, his = interval("steady_median")
    print(f"INTERVAL workload={workload} allocator={allocator} mode={mode} step1_ratio_90={lo1:.3f}-{hi1:.3f} "
          f"steady_ratio_90={los:.3f}-{his:.3f}")
def sign_split(mode, key):
    """The sign test: in how many rounds the mode was slower than plain, and
    the exact two-sided chance of a split at least that uneven if neither
    side were slower (ties left out). It needs no model of the spread, so
    it can show a cost that the median's interval alone cannot place."""
    diffs = [d for d in paired_values(mode, "plain", key, lambda x, y: x - y) if d != 0]
    n, slower = len(diffs), sum(d > 0 for d in diffs)
    return f"{slower}/{n}", sign_test_p(slower, n)
def paired_lines(mode):
    """PAIRED and SIGN: the ratio within each round (adjacent runs share the
    machine's drift, which then cancels), its median over rounds, exact
    interval and a bootstrap; the device memory the mode's run used beyond
    plain's at its end (the probe's own buffers and whatever the pools grew
    by; an interval spanning 0 is the pools' noise, not a saving); the time
    it adds to a steady step (on a GPU-bound one, where whole processes
    agree, the target is also <= 30 us). Returns what TARGET and ISSUE
    judge: {figure: (median, lo, hi)} and the number of rounds."""
    pstep1, plo1, phi1, pairs = paired(mode, "plain", "step1")
    psteady, plos, phis, _ = paired(mode, "plain", "steady_median")
    pmem, pmlo, pmhi, _ = paired(mode, "plain", "device_used", combine=lambda x, y: x - y)
    padd, padd_lo, padd_hi, _ = paired(mode, "plain", "steady_median", combine=lambda x, y: x - y)
    cover = median_interval([0.0] * pairs)
    coverage = f"{100 * cover[2]:.1f}%" if cover else "none"
    print(f"PAIRED workload={workload} allocator={allocator} mode={mode} rounds={pairs} interval=exact({coverage}) "
          f"step1_ratio={pstep1:.4f} step1_ratio_90={plo1:.3f}-{phi1:.3f} "
          f"steady_ratio={psteady:.4f} steady_ratio_90={plos:.3f}-{phis:.3f} "
          f"step1_ratio_boot90={'{:.3f}-{:.3f}'.format(*paired_bootstrap(mode, 'plain', 'step1'))} "
          f"steady_ratio_boot90={'{:.3f}-{:.3f}'.format(*paired_bootstrap(mode, 'plain', 'steady_median'))} "
          f"steady_added_us={1e6 * padd:.1f} steady_added_us_90={1e6 * padd_lo:.1f}..{1e6 * padd_hi:.1f} "
          f"device_used_diff_mib={pmem / 2**20:.1f} device_used_diff_mib_90={pmlo / 2**20:.1f}..{pmhi / 2**20:.1f}")
    s1, p1 = sign_split(mode, "step1")
    ss, ps = sign_split(mode, "steady_median")
    print(f"SIGN workload={workload} allocator={allocator} mode={mode} step1_slower={s1} step1_p={p1:.4f} "
          f"steady_slower={ss} steady_p={ps:.4f}")
    figures = {"step1": (pstep1, plo1, phi1), "steady": (psteady, plos, phis), "added": (padd, padd_lo, padd_hi)}
    return figures, pairs
def issue_line(mode, padd):
    """ISSUE: which side of the steady step the extra is on (rows that time
    the step's issue, examples/common.py): the CPU's time to issue it, up to
    its closing synchronise, against the whole step. An extra in the issue
    time is the training's CPU work slowed; one only in the whole step, the
    GPU's (or the wait for it)."""
    issue = "steady_issue_median"
    if not all(issue in r for r in rows[mode] + rows["plain"]):
        return
    iadd, ilo, ihi, _ = paired(mode, "plain", issue, combine=lambda x, y: x - y)
    si, pi = sign_split(mode, issue)
    print(f"ISSUE workload={workload} allocator={allocator} mode={mode} "
          f"plain_issue_ms={1000 * med('plain', issue):.3f} {mode}_issue_ms={1000 * med(mode, issue):.3f} "
          f"issue_added_us={1e6 * iadd:.1f} issue_added_us_90={1e6 * ilo:.1f}..{1e6 * ihi:.1f} "
          f"issue_slower={si} issue_p={pi:.4f} steady_added_us={1e6 * padd:.1f}")
def part_lines(mode):
    """Step 1 part by part (the lazy bench's cuts; the examples' since
    2026-12-07's nineteenth session): where the difference and the noise
    each sit. A part only where every row has it (rounds before the
    eighteenth session stored lazy's forward whole). PART_PAIRED: the
    paired difference in ms, exact interval and sign test (the cut parts
    add up to step 1; lazy's whole forward is the sum of its halves)."""
    for key in step1_parts(rows[mode] + rows["plain"]):
        ratio, lo, hi, _ = paired(mode, "plain", key)
        print(f"PART workload={workload} allocator={allocator} mode={mode} part={key[len('step1_'):]} "
              f"plain_ms={1000*med('plain', key):.1f} ({spread('plain', key)}) "
              f"{mode}_ms={1000*med(mode, key):.1f} ({spread(mode, key)}) "
              f"paired_ratio={ratio:.3f} paired_ratio_90={lo:.3f}-{hi:.3f}")
    for key in step1_parts(rows[mode] + rows["plain"]):
        diffs = paired_values(mode, "plain", key, lambda x, y: 1000 * (x - y))
        print(f"PART_PAIRED workload={workload} allocator={allocator} mode={mode} part={key[len('step1_'):]} "
              f"rounds={len(diffs)} " + paired_text(diffs, "ms", 1))
def verdict(pairs, r, lo, hi, limit, unit=""):
    """met: even the interval's top is within the target; over: even its
    bottom is above it; otherwise the rounds cannot tell, and the rounds at
    which the interval's side toward the target would clear it (it narrows
    about as 1/sqrt(rounds)), were the median and the spread to stay: a plan
    for the next calls."""
    if math.isnan(lo):
        return f"not resolved: {pairs} rounds give no 90% interval (5 at least)"
    if hi <= limit:
        return "met"
    if lo > limit:
        return "over"
    side, gap = (hi - r, limit - r) if r < limit else (r - lo, r - limit)
    # A median close to the target gives a plan no session can run
    # (a 0.0003 gap asked for 886,836 rounds): say why instead.
    planned = math.ceil(pairs * (side / gap) ** 2) if gap > 0 else None
    if planned is None:
        need = "its median is the target"
    elif planned > MAX_PLANNED_ROUNDS:
        need = (f"its median is {gap:.4f}{unit} from the target: more than {MAX_PLANNED_ROUNDS} "
                "rounds would be needed at this spread")
    else:
        need = f"~{planned} rounds would resolve it at this spread"
    return f"not resolved by {pairs} rounds; {need}"
def target_line(figures, pairs):
    """TARGET: the doctor's paired step 1 (<= 1.03) and steady step (<= 1.01),
    and the time added to a GPU-bound steady step (<= 30 us)."""
    (pstep1, plo1, phi1), (psteady, plos, phis) = figures["step1"], figures["steady"]
    padd, padd_lo, padd_hi = figures["added"]
    gpu_bound = all(GPU_BOUND.get(workload, lambda row: False)(r) for r in rows["plain"])
    added = (verdict(pairs, 1e6 * padd, 1e6 * padd_lo, 1e6 * padd_hi, 30.0, " us") if gpu_bound else
             f"not judged: the clause is for a GPU-bound steady step, and {workload}'s at this shape is not known to be one")
    print(f"TARGET workload={workload} allocator={allocator} paired step1={pstep1:.4f} "
          f"(<= 1.03: {verdict(pairs, pstep1, plo1, phi1, 1.03)}) "
          f"steady={psteady:.4f} (<= 1.01: {verdict(pairs, psteady, plos, phis, 1.01)}) "
          f"steady_added={1e6 * padd:.1f}us (<= 30 us: {added})")
def mode_lines(mode):
    """Every line of one mode against plain, in the order they print."""
    overhead_lines(mode)
    figures, pairs = paired_lines(mode)
    order_line(mode)
    speed_line(mode)
    issue_line(mode, figures["added"][0])
    for window, _ in WINDOWS:
        if has_window(mode, window):
            process_lines(mode, window, pairs)
    for window in CALIB_WINDOWS:
        if has_window(mode, window, CALIB):
            process_lines(mode, window, pairs, CALIB)
    for window, timed in WINDOWS:
        work_line(mode, window, timed)
    part_lines(mode)
    if mode == "doctor":
        target_line(figures, pairs)
def work_line(mode, window, timed):
    """WORK (rows with the main thread's counters, examples/thread_counters.py):
    the instructions the main thread retired in the window, the mode's over
    plain's within each round (median, exact interval, rounds with more),
    the cycles likewise and each side's instructions a cycle, beside the
    window's time ratio over the same rounds. The instructions are the work
    whatever speed the machine ran at: a time ratio above the work's is
    slower execution (the machine's state, or caches the mode disturbs),
    not more work."""
    key, cycles = f"{window}_main_instructions", f"{window}_main_cycles"
    counted = lambda k: all(r.get(k) for r in rows[mode] + rows["plain"])
    if not counted(key):
        return
    ratio, lo, hi, pairs = paired(mode, "plain", key)
    more, _ = sign_split(mode, key)
    text = f"instructions_ratio={ratio:.4f} instructions_ratio_90={lo:.3f}-{hi:.3f} instructions_more={more}"
    if counted(cycles):
        c, clo, chi, _ = paired(mode, "plain", cycles)
        ipc = lambda kind: statistics.median(r[key] / r[cycles] for r in rows[kind])
        text += (f" cycles_ratio={c:.4f} cycles_ratio_90={clo:.3f}-{chi:.3f} "
                 f"ipc_plain={ipc('plain'):.3f} ipc_{mode}={ipc(mode):.3f}")
    t, tlo, thi, _ = paired(mode, "plain", timed)
    print(f"WORK workload={workload} allocator={allocator} mode={mode} window={window} rounds={pairs} {text} "
          f"time_ratio={t:.4f} time_ratio_90={tlo:.3f}-{thi:.3f}")
def state_lines():
    """STATE for each window and calibration the rows carry, and PLACEMENT
    where they say where the threads ran."""
    for window, timed in WINDOWS:
        if any(r.get(f"{window}_main_cpu_ms") is not None for kind in rows.values() for r in kind):
            state_line(window, timed)
            placement_lines(window, timed)
    for window in CALIB_WINDOWS:
        if any(r.get(f"{window}_python_ms") is not None for kind in rows.values() for r in kind):
            for _, timed in WINDOWS:
                state_line(window, timed, CALIB)
def placement_lines(window, timed):
    """PLACEMENT (rows since the twenty-first session store the CPU each
    thread last ran on, `<window>_threads_cpu`): per pair of the CPU the
    main thread ended the window's steps on and the one the window's
    busiest other thread ran on, the processes of each mode and their
    median time. Read with benches/cpu_siblings.py's SIBLINGS: two CPUs
    that share a hidden core run both threads slower."""
    pairs = {}
    for mode, kind in rows.items():
        for r in kind:
            threads, cpus = r.get(f"{window}_threads_ms"), r.get(f"{window}_main_cpus")
            placed = r.get(f"{window}_threads_cpu")
            if not (threads and cpus and placed):
                continue
            busiest = max(threads, key=threads.get)
            key = ("+".join(map(str, cpus)), busiest, placed.get(busiest))
            pairs.setdefault(key, []).append((mode, r[timed]))
    for (main, busiest, cpu), runs in sorted(pairs.items(), key=lambda kv: (-len(kv[1]), str(kv[0]))):
        modes = " ".join(f"{m}={sum(1 for k, _ in runs if k == m)}" for m in rows if any(k == m for k, _ in runs))
        print(f"PLACEMENT workload={workload} allocator={allocator} window={window} main_cpu={main} "
              f"busiest='{busiest}' its_cpu={cpu} processes={len(runs)} {modes} "
              f"{timed}_ms={1000 * statistics.median(t for _, t in runs):.3f}")
def control_line():
    """CONTROL, the A/A control: the doctor against the second plain run
    within each round, as PAIRED does against the first. If the doctor's
    PAIRED ratio is off 1 but this one is not, the difference is the
    method's, not the doctor's."""
    def between(key):
        ratio, lo, hi, n = paired("doctor", "plain-again", key)
        return f"{ratio:.4f} ({lo:.3f}-{hi:.3f})", n
    step1, n = between("step1")
    steady, _ = between("steady_median")
    print(f"CONTROL workload={workload} allocator={allocator} doctor_vs_plain_again rounds={n} "
          f"step1_ratio={step1} steady_ratio={steady}")
def detach_lines():
    """DETACH_PAIRED: the detach against CUPTI left attached within each
    round where both ran: what CUPTI attached after the watch costs a step
    (the attached run's step minus the detached one's), exact interval and
    sign test. Before 2026-12-07 the doctor stayed attached and `detach`
    (attached again) or `detach-bare` (not) detached; since, the doctor
    detaches and `attached` (PREWARM_DOCTOR_DETACH_AFTER_WATCH=0) stays
    attached."""
    for attached, detached in (("doctor", "detach"), ("doctor", "detach-bare"), ("attached", "doctor")):
        if attached in rows and detached in rows:
            for key, unit, scale, digits in (("steady_median", "us", 1e6, 0), ("step1", "ms", 1e3, 2)):
                diffs = paired_values(attached, detached, key, lambda x, y: scale * (x - y))
                print(f"DETACH_PAIRED workload={workload} allocator={allocator} mode={detached} "
                      f"figure={key} rounds={len(diffs)} " + paired_text(diffs, unit, digits)
                      + f" attached={attached}")
    # Both kinds of files given at once (builds before 2026-12-07, whose doctor
    # stayed attached, and after, whose doctor detaches): one line over every
    # round, each round's attached run less its detached one — `attached` less
    # the doctor where the round ran `attached`, else the doctor less `detach`.
    if "detach" in rows and "attached" in rows and "doctor" in rows:
        for key, unit, scale, digits in (("steady_median", "us", 1e6, 0), ("step1", "ms", 1e3, 2)):
            diffs = []
            for r in rounds.values():
                pair = ("attached", "doctor") if "attached" in r else ("doctor", "detach")
                if all(m in r for m in pair):
                    diffs.append(scale * (r[pair[0]][key] - r[pair[1]][key]))
            print(f"DETACH_PAIRED workload={workload} allocator={allocator} mode=pooled "
                  f"figure={key} rounds={len(diffs)} " + paired_text(diffs, unit, digits)
                  + " attached=either")
def breakdown_lines():
    """BREAKDOWN: what each part costs step 1 = doctor minus doctor without
    it (for doctor-modules, which switches a part on: it minus doctor)."""
    doctor = med("doctor", "step1")
    extra = doctor - med("plain", "step1")
    print(f"BREAKDOWN workload={workload} allocator={allocator} part=all step1_extra_ms={1000*extra:.1f}")
    parts = {"no-kernels": "kernel records", "no-shim": "shim hooks", "no-nvml": "NVML sampling",
             "nvml-10ms": "NVML's device query every 1 ms (vs 10 ms)",
             "tmpfs-out": "run-folder writes (vs tmpfs)", "no-probe": "probe (CUPTI subscription, callbacks, activity)",
             "doctor-modules": "module-loaded callbacks (if switched on)",
             "slow-tick": "writer's 10 ms tick (vs 100 ms) while kernel records are on",
             "no-pool-reads": "pool reads after the first steps",
             "probe-clock": "CUPTI calling the probe's clock (if switched on)",
             "agent-bare": "torchrun's agent instrumented"}
    for mode, part in parts.items():
        if mode not in rows:
            continue
        switched_on = mode in ("doctor-modules", "probe-clock")
        cost = med(mode, "step1") - doctor if switched_on else doctor - med(mode, "step1")
        # Paired: the difference within each round (the same machine drift
        # on both sides), its median over rounds and a bootstrap interval.
        sign = -1 if switched_on else 1
        diff, lo, hi, n = paired("doctor", mode, "step1", lambda x, y: sign * (x - y))
        # The same for a steady step, in microseconds (a part that costs
        # every step, such as the async allocator's pool reads).
        sdiff, slo, shi, _ = paired("doctor", mode, "steady_median", lambda x, y: sign * (x - y))
        print(f"BREAKDOWN workload={workload} allocator={allocator} part=\"{part}\" mode={mode} "
              f"step1_ms={1000*cost:.1f} share={cost / extra if extra > 0 else float('nan'):.2f} "
              f"paired_ms={1000*diff:.1f} paired_ms_90={1000*lo:.1f}..{1000*hi:.1f} rounds={n} "
              f"steady_paired_us={1e6*sdiff:.1f} steady_paired_us_90={1e6*slo:.1f}..{1e6*shi:.1f}")
def counters_line():
    """COUNTERS: the main-thread counters the rows' machine could not give
    (examples/thread_counters.py), each with its reason and how many
    processes said so: why a call has no WORK line."""
    said = {}
    for kind in rows.values():
        for r in kind:
            for name, why in (r.get("main_counters_unavailable") or {}).items():
                said[(name, why)] = said.get((name, why), 0) + 1
    if said:
        every = sum(len(kind) for kind in rows.values())
        print(f"COUNTERS workload={workload} allocator={allocator} processes={every} unavailable="
              + ";".join(f"{name}:{why.split(':')[0]}:{n}" for (name, why), n in sorted(said.items())))
for mode in rows:
    if mode != "plain":
        mode_lines(mode)
counters_line()
state_lines()
if "doctor" in rows and "plain-again" in rows:
    control_line()
detach_lines()
if breakdown == "1" and "doctor" in rows:
    breakdown_lines()
