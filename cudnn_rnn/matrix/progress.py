"""A one-line progress bar on stderr: the cells that will run, counts per outcome, an ETA.
While some variants wait for the cell they vary (they run only if it gets past the RNN
descriptor), the total and the ETA are upper bounds, shown as ``<=``."""
from __future__ import annotations

import sys
import time
from collections import Counter

from cudnn_rnn.matrix.record import OUTCOME_SHORT

SHOWN = ("OK", "NOT_SUPPORTED", "BAD_PARAM", "WRONG_RESULT", "CRASH")


class Progress:
    def __init__(self, total: int, stream=None, done: int = 0, undecided: int = 0):
        self.total = total
        self.undecided = undecided  # of the total: variants whose base has not run yet
        self.stream = stream or sys.stderr
        self.tty = getattr(self.stream, "isatty", lambda: False)()
        self.counts: Counter = Counter()
        self.done = done
        self.started = time.monotonic()
        self._new = 0
        self._last = 0.0

    def update(self, outcome: str) -> None:
        self.counts[outcome] += 1
        self.done += 1
        self._new += 1
        now = time.monotonic()
        if self.tty and now - self._last > 0.1 or not self.tty and now - self._last > 10 \
                or self.done == self.total:
            self._last = now
            self.render()

    def leave_out(self, cells: int) -> None:
        """Count ``cells`` fewer to run (variants whose base was refused: they never run)."""
        self.total -= cells
        self.undecided = max(0, self.undecided - cells)
        if cells and self.done == self.total:
            self.render()

    def decide(self, cells: int) -> None:
        """``cells`` variants will run (their base got past the RNN descriptor)."""
        self.undecided = max(0, self.undecided - cells)

    def line(self) -> str:
        elapsed = time.monotonic() - self.started
        rate = self._new / elapsed if elapsed > 0 else 0.0
        left = self.total - self.done
        eta = left / rate if rate > 0 else float("inf")
        width = 24
        filled = int(width * self.done / self.total) if self.total else width
        bar = "#" * filled + "." * (width - filled)
        counts = " ".join(f"{k} {self.counts.get(k, 0)}" for k in SHOWN)
        counts += "".join(f" {OUTCOME_SHORT.get(k, k)} {v}"
                          for k, v in sorted(self.counts.items()) if k not in SHOWN)
        eta_text = "--:--" if eta == float("inf") else f"{int(eta // 60):d}:{int(eta % 60):02d}"
        bound = "<=" if self.undecided else ""
        return (f"[{bar}] {self.done}/{bound}{self.total} | {counts} | "
                f"{rate:.1f} cells/s ETA {bound}{eta_text}")

    def render(self) -> None:
        text = self.line()
        if self.tty:
            self.stream.write("\r" + text)
            if self.done == self.total:
                self.stream.write("\n")
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def finish(self) -> None:
        if self.tty and self.done != self.total:
            self.stream.write("\n")
            self.stream.flush()
