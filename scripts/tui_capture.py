#!/usr/bin/env python3
"""The live dashboard during a real matrix, captured at three moments, on a
machine without tmux: the doctor runs in a pseudo-terminal of W x H cells and
pyte (a pure-Python terminal emulator: `pip install pyte`) keeps the screen.

Moments (as scripts/tui-capture.sh, the tmux version): setup (the Live tab
shows a rank before step 1), step 1 (a rank inside its first step; then its
Timeline), and the verdicts (the matrix ended: Matrix, Timeline, Events,
Ranks and Account tabs), then after `q`.

    python3 scripts/tui_capture.py --out tui-out -- \
        prewarm-doctor run --tui --out RUN --preset env:cublas -- python3 train.py

Writes OUT/NN-name.txt (the screen as text), OUT/tui-capture.log (what
happened when) and exits with the doctor's exit code.
"""

import argparse
import fcntl
import os
import pty
import re
import select
import struct
import sys
import termios
import time

import pyte

KEYS = {"Tab": b"\t", "BTab": b"\x1b[Z", "Enter": b"\r", "Esc": b"\x1b"}


class Session:
    """One program in a pseudo-terminal, its screen kept by pyte."""

    def __init__(self, argv, width, height, log):
        self.log = log
        self.t0 = time.monotonic()
        self.screen = pyte.Screen(width, height)
        # Answer the terminal's queries (cursor position, device attributes).
        self.screen.write_process_input = self._reply
        self.stream = pyte.ByteStream(self.screen)
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.environ["TERM"] = "xterm-256color"
            os.execvp(argv[0], argv)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))
        self.status = None

    def _reply(self, data):
        os.write(self.fd, data.encode() if isinstance(data, str) else data)

    def say(self, msg):
        line = f"[{time.monotonic() - self.t0:6.1f}s] {msg}"
        print(line, flush=True)
        self.log.write(line + "\n")
        self.log.flush()

    def pump(self, seconds):
        """Feeds the program's output to the screen for up to `seconds`."""
        end = time.monotonic() + seconds
        while self.status is None:
            left = end - time.monotonic()
            if left <= 0:
                return
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.1))
            if ready:
                try:
                    data = os.read(self.fd, 65536)
                except OSError:
                    data = b""
                if not data:
                    self._reap()
                    return
                self.stream.feed(data)

    def _reap(self):
        _, status = os.waitpid(self.pid, 0)
        self.status = os.waitstatus_to_exitcode(status)

    def text(self):
        return "\n".join(line.rstrip() for line in self.screen.display)

    def wait_for(self, pattern, timeout, unless=None):
        """Until the screen matches `pattern`; gives up early once it
        matches `unless` (a later moment: the run ended)."""
        regex = re.compile(pattern, re.M)
        later = re.compile(unless, re.M) if unless else None
        end = time.monotonic() + timeout
        while time.monotonic() < end and self.status is None:
            if regex.search(self.text()):
                return True
            if later and later.search(self.text()):
                break
            self.pump(0.2)
        found = bool(regex.search(self.text()))
        if not found:
            self.say(f"did not see /{pattern}/; screen:\n{self.text()}")
        return found

    def keys(self, *names):
        for k in names:
            os.write(self.fd, KEYS.get(k, k.encode()))
            self.pump(0.4)

    def capture(self, out, name):
        with open(os.path.join(out, name + ".txt"), "w") as f:
            f.write(self.text() + "\n")
        self.say(f"captured {name}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--width", type=int, default=120)
    ap.add_argument("--height", type=int, default=40)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "tui-capture.log"), "w") as log:
        s = Session(cmd, a.width, a.height, log)
        s.say(f"started in a {a.width}x{a.height} pseudo-terminal: {' '.join(cmd)}")
        ended = r" EXIT [0-9]+ "
        if s.wait_for(r"^rank 0 +setup", a.timeout, unless=ended):
            s.capture(a.out, "01-setup")
        if s.wait_for(r"^rank 0 +step 1 ", a.timeout, unless=ended):
            s.capture(a.out, "02-step1")
            s.keys("Tab", "Tab", "3")
            s.capture(a.out, "02-step1-timeline")
            s.keys("BTab", "BTab")
        if s.wait_for(ended, a.timeout):
            s.pump(1.5)  # the loader's final read
            s.keys("Tab")
            s.capture(a.out, "03-verdicts")
            s.keys("Enter")
            s.capture(a.out, "03-verdict-detail")
            s.keys("Esc", "Tab", "2")
            s.capture(a.out, "03-timeline-step1")
            for name in ("03-events", "03-ranks", "03-account"):
                s.keys("Tab")
                s.capture(a.out, name)
            s.keys("q")
        s.pump(30)
        if s.status is None:
            s.say("still running after q; sending SIGTERM")
            os.kill(s.pid, 15)
            s.pump(10)
        s.capture(a.out, "04-after-exit")
        s.say(f"exit {s.status}")
    sys.exit(s.status if isinstance(s.status, int) else 1)


if __name__ == "__main__":
    main()
