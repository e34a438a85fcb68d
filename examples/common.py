"""Shared pieces of the prewarm-doctor examples: a tiny model, the training loop,
prewarm switches (flag or environment variable, so the generic preset can drive
them) and the cross-check line each script prints after every step.

Nothing is downloaded; data is random. Run any example directly, under
torchrun, or under `prewarm-doctor run -- ...`.
"""

import argparse
import json
import os
import statistics
import sys
import threading
import time

import torch

import thread_counters


def parse(description, prewarms, extra=None):
    """`prewarms` maps a prewarm name to its help; each gets --prewarm-NAME and
    the environment switch PREWARM_<NAME>=1. `extra(parser)` adds a script's
    own options."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--occupy-gib", type=float, default=0.0,
                   help="after setup, hold this much device memory (or, if negative, leave only -N GiB free) to model peak step memory")
    for name, help_text in prewarms.items():
        p.add_argument(f"--prewarm-{name.replace('_', '-')}", action="store_true", help=help_text)
    if extra is not None:
        extra(p)
    args = p.parse_args()
    for name in prewarms:
        attr = f"prewarm_{name}"
        if os.environ.get(f"PREWARM_{name.upper()}", "") in ("1", "true", "yes"):
            setattr(args, attr, True)
    return args


def device():
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    return torch.device("cuda", local)


def model(hidden, dtype=torch.bfloat16):
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(hidden, hidden, dtype=dtype, device="cuda"),
        torch.nn.GELU(),
        torch.nn.Linear(hidden, hidden, dtype=dtype, device="cuda"),
    )


def occupy(gib):
    """Models the memory a real model holds at its step-1 peak."""
    if gib == 0:
        return None
    free, _ = torch.cuda.mem_get_info()
    if gib > 0:
        nbytes = int(gib * (1 << 30))
    else:
        nbytes = max(0, free - int(-gib * (1 << 30)))
    return torch.empty(nbytes, dtype=torch.uint8, device="cuda")


def crosscheck(step):
    """What the script itself sees, to compare with prewarm-doctor's account."""
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    line = {
        "step": step,
        "device_used": total - free,
        "reserved": torch.cuda.memory_reserved(),
        "out_of_pool": total - free - torch.cuda.memory_reserved(),
        "rank": int(os.environ.get("RANK", "0")),
    }
    print("CROSSCHECK " + json.dumps(line), flush=True)


# Step 1's cuts while the footprint bench times it with them (train sets
# `last`).
_step1 = {"last": None, "parts": {}}


def cut(name):
    """Ends step 1's part `name` here, when the footprint bench times step 1
    and asks for its parts (EXAMPLE_STEPTIMES=1 EXAMPLE_STEP1_CUTS=1):
    synchronised, so each part holds its own GPU work, and stored as
    ``step1_<name>``; the part after the last cut is ``step1_optimizer``.
    The parts add up to step 1, and the row says ``cut_step1: 1`` (its step
    1 has these synchronisations: the summary pools it only with rows that
    have them too). Otherwise it does nothing: the scripts' own runs, and
    the bench's uncut rounds, are unchanged."""
    if _step1["last"] is None:
        return
    torch.cuda.synchronize()
    now = time.perf_counter()
    _step1["parts"]["step1_" + name] = now - _step1["last"]
    _step1["last"] = now


def train(args, step_fn, optimizer):
    """`step_fn` returns the step's loss (or None): printed exactly (``repr``
    of the float) as ``LOSS rank step value``, so runs with and without a
    prewarm can be compared bit for bit. With ``EXAMPLE_STEPTIMES=1`` each
    step is also timed (CUDA-synchronised wall time, and the time to issue
    it, up to the closing synchronise) and one ``STEPTIMES`` line ends the
    run, as benches/gpu_overhead.py prints: the footprint bench
    (benches/gpu_overhead.sh) runs the examples as its workloads that way."""
    timed = os.environ.get("EXAMPLE_STEPTIMES") == "1"
    cuts = timed and os.environ.get("EXAMPLE_STEP1_CUTS") == "1"
    times, issued = [], []
    window = StepWindows(args.steps) if timed else None
    for step in range(1, args.steps + 1):
        if timed:
            torch.cuda.synchronize()
            window.before_step(step)
            t0 = time.perf_counter()
            _step1["last"] = t0 if step == 1 and cuts else None
        optimizer.zero_grad(set_to_none=True)
        loss = step_fn(step)
        optimizer.step()
        if timed:
            # The CPU's part: the step issued, before waiting for the GPU.
            issued.append(time.perf_counter() - t0)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
            if step == 1 and _step1["parts"]:
                _step1["parts"]["step1_optimizer"] = t0 + times[0] - _step1["last"]
            _step1["last"] = None
            window.after_step(step)
        crosscheck(step)
        if loss is not None:
            print(f"LOSS {int(os.environ.get('RANK', '0'))} {step} {loss.item()!r}", flush=True)
    if timed:
        print_steptimes(args, times, {"steady_issue_median": statistics.median(issued[STEADY_AFTER:]),
                                      **({"cut_step1": 1} if cuts else {}), **_step1["parts"],
                                      **window.figures()})
    print(f"done: {args.steps} steps", file=sys.stderr, flush=True)


# Steps before the steady state (lazy work, allocator growth).
STEADY_AFTER = 10


def _threads():
    """Each thread of this process: tid -> (name, ns on a CPU, ns waiting
    for one, the CPU it last ran on). From /proc/self/task/*/schedstat
    where the kernel has it (the wait is the run queue's delay: another
    thread had the CPU), else from stat's ticks (no wait). A thread gone
    between the reads is left out."""
    tick_ns = 1e9 / os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
            name = stat[stat.index("(") + 1:stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2:].split()
            cpu = int(fields[36]) if len(fields) > 36 else None
            try:
                with open(f"/proc/self/task/{tid}/schedstat") as f:
                    run, wait = (int(v) for v in f.read().split()[:2])
            except (OSError, ValueError):
                run, wait = (int(fields[11]) + int(fields[12])) * tick_ns, None
        except (OSError, ValueError):
            continue
        out[int(tid)] = (name, run, wait, cpu)
    return out


def _cpu_ticks():
    """Each CPU's (busy, all) ticks from /proc/stat (busy: all but idle and
    iowait); empty where it cannot be read."""
    out = {}
    try:
        with open("/proc/stat") as f:
            for line in f:
                name, *values = line.split()
                if name.startswith("cpu") and name != "cpu":
                    ticks = [int(v) for v in values]
                    out[int(name[3:])] = (sum(ticks) - ticks[3] - ticks[4], sum(ticks))
    except (OSError, ValueError, IndexError):
        return {}
    return out


def _siblings(cpu):
    """The CPU's hyperthread siblings (not itself); empty where unknown."""
    try:
        with open(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list") as f:
            text = f.read().strip()
    except OSError:
        return []
    cpus = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return sorted(cpus - {cpu})


def _main_cpu():
    """The CPU this thread last ran on (stat's field 39)."""
    try:
        with open("/proc/thread-self/stat") as f:
            stat = f.read()
        return int(stat[stat.rindex(")") + 2:].split()[36])
    except (OSError, ValueError, IndexError):
        return None


# A CPU's busy share over a window at least this is stored (`cpu_busy`).
CPU_BUSY_SHOWN = 0.05


class Window:
    """What the process did between two reads (whole steps, read between
    them, never inside a timed one): a whole process can run every steady
    step slower than another of the same script (fsdp2, 2026-12-07's call
    60), and a step 1 can take longer under the doctor than its accounted
    time explains; these figures say whether the main thread then spent
    more CPU on the same work, waited for a CPU, was switched out or moved,
    or shared the CPUs with busier threads of its own or the machine's."""

    def __init__(self, counters=None):
        self.start = self.end = None
        self.cpus = []  # the CPU the main thread ended each step on
        self.counters = counters  # the main thread's (thread_counters), opened there

    def _snapshot(self):
        import resource

        usage = resource.getrusage(resource.RUSAGE_THREAD)
        return {"main": threading.get_native_id(), "threads": _threads(), "cpus": _cpu_ticks(),
                "vol": usage.ru_nvcsw, "invol": usage.ru_nivcsw,
                "counters": self.counters.read() if self.counters else {}}

    def open(self):
        self.start = self._snapshot()

    def step_ended(self, last):
        self.cpus.append(_main_cpu())
        if last:
            self.end = self._snapshot()

    def figures(self, prefix, steps):
        """Per step of the window's `steps`, keys `<prefix>_...`: the main
        thread's CPU and run-queue wait (ms), its voluntary and involuntary
        switches, the other threads' CPU (ms) in all and by thread name, and
        the CPU each name's busiest thread last ran on; the CPUs the main
        thread ended steps on and how often that changed; each busy CPU's
        share (a virtual machine hides which CPUs share a core: a busy CPU
        that slows the main thread names one, benches/cpu_siblings.py);
        the main thread's counters (`main_instructions`, `main_cycles`:
        its work apart from the speed it ran at), where the machine has
        them."""
        if self.start is None or self.end is None:
            return {}
        before, after = self.start["threads"], self.end["threads"]
        main = self.start["main"]

        def used(tid):
            name, run, wait, _ = after[tid]
            _, run0, wait0, _ = before.get(tid, (name, 0, 0 if wait is not None else None, None))
            return name, run - run0, (wait - wait0) if wait is not None and wait0 is not None else None

        _, main_run, main_wait = used(main) if main in after else (None, 0, None)
        others, placed = {}, {}
        for tid in after:
            if tid != main:
                name, run, _ = used(tid)
                others[name] = others.get(name, 0) + run
                # Where the name's busiest thread of the window ran last.
                if run > 0 and run > placed.get(name, (0, None))[0]:
                    placed[name] = (run, after[tid][3])
        seen = [c for c in self.cpus if c is not None]
        counted = {f"main_{name}": (self.end["counters"][name] - count) / steps
                   for name, count in self.start["counters"].items() if name in self.end["counters"]}
        return {f"{prefix}_{k}": v for k, v in {
            "main_cpu_ms": main_run / 1e6 / steps,
            "main_wait_ms": main_wait / 1e6 / steps if main_wait is not None else None,
            "vol_switches": (self.end["vol"] - self.start["vol"]) / steps,
            "invol_switches": (self.end["invol"] - self.start["invol"]) / steps,
            "others_cpu_ms": sum(others.values()) / 1e6 / steps,
            "threads_ms": {k: round(v / 1e6 / steps, 4) for k, v in sorted(others.items()) if v > 0},
            "threads_cpu": {k: cpu for k, (_, cpu) in sorted(placed.items())},
            "main_cpus": sorted(set(seen)),
            "migrations": sum(a != b for a, b in zip(seen, seen[1:])),
            **self._busy(seen),
            **counted,
        }.items()}

    def _busy(self, seen):
        """The machine's busy CPUs on average over the window (the whole
        machine, this process included), and how busy the hyperthread
        siblings of the CPU the main thread ended most steps on were (a
        sibling's work slows the main thread's without any wait)."""
        before, after = self.start["cpus"], self.end["cpus"]
        cpus = [c for c in after if c in before and after[c][1] > before[c][1]]
        if not cpus:
            return {}
        share = {c: (after[c][0] - before[c][0]) / (after[c][1] - before[c][1]) for c in cpus}
        out = {"busy_cpus": sum(share.values()),
               "cpu_busy": {str(c): round(v, 3) for c, v in sorted(share.items()) if v >= CPU_BUSY_SHOWN}}
        if seen:
            home = max(set(seen), key=seen.count)
            siblings = [c for c in _siblings(home) if c in share]
            out["sibling_busy"] = statistics.fmean(share[c] for c in siblings) if siblings else None
        return out


class StepWindows:
    """Step 1's window (`first_...`) and the steady steps' (`steady_...`,
    per step) of a timed run: `before_step` just before a step's clock
    starts, `after_step` just after it stops, steps numbered from 1."""

    def __init__(self, steps):
        self.steps = steps
        # Opened here, on the thread that runs the steps.
        self.counters = thread_counters.ThreadCounters()
        self.first, self.steady = Window(self.counters), Window(self.counters)
        self.before = {}

    def before_step(self, step):
        if step == 1:
            # The process's speed as step 1 starts, outside its window: the
            # one after the last step catches the state step 1 ran in only
            # in part (2026-12-07's calls 64-66, rho 0.10-0.48).
            self.before = {"calib0_" + k[len("calib_"):]: v
                           for k, v in calibration(self.counters).items()}
            self.first.open()

    def after_step(self, step):
        if step == 1:
            self.first.step_ended(last=True)
        if step == STEADY_AFTER:
            self.steady.open()
        elif step > STEADY_AFTER:
            self.steady.step_ended(last=step == self.steps)

    def figures(self):
        """Both windows' figures, the calibration taken before step 1
        (`calib0_...`) and then, after the last step and outside every
        window, the calibration (`calibration`); the counters the machine
        could not give, and why (`main_counters_unavailable`)."""
        unavailable = self.counters.unavailable
        return {**self.first.figures("first", 1), **self.steady.figures("steady", self.steps - STEADY_AFTER),
                **self.before, **calibration(self.counters),
                **({"main_counters_unavailable": unavailable} if unavailable else {})}


# The calibration's fixed work: CALIBRATION_ROUNDS runs of each piece, the
# median kept (a run cut by an interrupt does not move it).
CALIBRATION_ROUNDS = 5
CALIBRATION_LOOP = 200_000
CALIBRATION_BYTES = 32 << 20


def calibration(counters=None):
    """How fast this process's main thread runs a fixed piece of work, in
    its thread's CPU time (so a wait for a CPU does not count): an
    interpreter loop (`calib_python_ms`) and a copy of 32 MiB
    (`calib_memory_ms`, the memory and last-level cache). The same work in
    every process of every mode: a process whose steps all run slower
    (fsdp2's slow state, 2026-12-07's calls 60-63) shows here if its CPU
    runs the same instructions slower, and not if it does more work. With
    `counters` (thread_counters, this thread's), the loop's count of each
    (`calib_python_instructions`...): the same in every process, whatever
    its speed, where a counter counts work."""
    counted = {}

    def timed(work, count=False):
        spent, runs = [], {}
        for _ in range(CALIBRATION_ROUNDS):
            before = counters.read() if count and counters else {}
            t = time.thread_time_ns()
            work()
            spent.append((time.thread_time_ns() - t) / 1e6)
            after = counters.read() if before else {}
            for name in before.keys() & after.keys():
                runs.setdefault(name, []).append(after[name] - before[name])
        counted.update({f"calib_python_{name}": statistics.median(v) for name, v in runs.items()})
        return statistics.median(spent)

    def loop():
        total = 0
        for i in range(CALIBRATION_LOOP):
            total += i * i
        return total

    source = bytearray(CALIBRATION_BYTES)
    return {"calib_python_ms": timed(loop, count=True), "calib_memory_ms": timed(lambda: bytes(source)),
            **counted}


def print_steptimes(args, times, extra=None):
    """The ``STEPTIMES`` line: step 1, step 2, the steady steps' median and
    mean, the shape, the device memory in use at the end, the allocator and
    the workload (the script and its arguments, as run); `extra` adds
    figures of the script's own (the lazy bench's step-1 parts)."""
    if len(times) < STEADY_AFTER + 10:
        sys.exit(f"EXAMPLE_STEPTIMES=1 needs --steps of at least {STEADY_AFTER + 10}")
    free, total = torch.cuda.mem_get_info()
    try:
        allocator = torch.cuda.get_allocator_backend()
    except Exception:
        allocator = "unknown"
    steady = times[STEADY_AFTER:]
    print("STEPTIMES " + json.dumps({
        "step1": times[0],
        "step2": times[1],
        "steady_median": statistics.median(steady),
        "steady_mean": statistics.fmean(steady),
        **(extra or {}),
        "steps": args.steps,
        "hidden": args.hidden,
        "batch": args.batch,
        "device_used": total - free,
        "reserved": torch.cuda.memory_reserved(),
        "allocator": allocator,
        "workload": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
    }), flush=True)


def init_torchrun(port=29540):
    """The default NCCL process group; plain `python` works as a one-rank job.
    No `device_id`: binding one makes torch create every later group's
    communicator eagerly (comm split at `new_group`), hiding the lazy
    creation these examples are about."""
    if "RANK" not in os.environ:
        os.environ.update({"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    import torch.distributed as dist

    dev = device()
    dist.init_process_group("nccl")
    return dev


def new_group(ranks, desc):
    """A process group named `desc` (torch's group_desc, which prewarm-doctor
    reads to name the group's communicator); every rank must call this for
    every group, members or not."""
    import torch.distributed as dist

    try:
        return dist.new_group(ranks, group_desc=desc)
    except TypeError:
        return dist.new_group(ranks)


def warm_groups(dev, groups):
    """One one-element all-reduce per group: NCCL creates the group's
    communicator now, at setup, instead of at its first real collective."""
    import torch.distributed as dist

    for group in groups:
        if group is None or dist.get_world_size(group) < 1:
            continue
        t = torch.zeros(1, device=dev)
        dist.all_reduce(t, group=group)
    torch.cuda.synchronize()


def fork_rng_on(dev):
    """Prewarms with synthetic inputs must not change training's random stream."""
    return torch.random.fork_rng(devices=[dev.index if dev.index is not None else torch.cuda.current_device()])
