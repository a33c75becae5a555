"""Timing commands side by side: alternating runs, medians, peak memory.

Each command runs as a child process whose own resource usage is read with
``os.wait4`` (peak resident set size, as ``/usr/bin/time -f %M`` reports
it).  Commands alternate within each round, so a change in the machine's
load or page cache during the benchmark affects all of them alike; a warm-up
round first puts the input in the page cache.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Command:
    name: str
    argv: tuple[str, ...]


@dataclass(frozen=True)
class Run:
    seconds: float
    peak_rss_kib: int


@dataclass
class Measurements:
    command: Command
    runs: list[Run] = field(default_factory=list)

    @property
    def median_seconds(self) -> float:
        return statistics.median(r.seconds for r in self.runs)

    @property
    def peak_rss_mib(self) -> float:
        return max(r.peak_rss_kib for r in self.runs) / 1024


class CommandFailed(Exception):
    pass


def compile_bytecode(python: str) -> None:
    """Compile elfpatch's modules for ``python``, as ``pip install`` does, before timing it.

    From a checkout (an editable install) each run would otherwise compile
    every module again when bytecode writing is off, timing the compiler.
    """
    subprocess.run([python, "-c", "import compileall, os, elfpatch; "
                    "compileall.compile_dir(os.path.dirname(elfpatch.__file__), quiet=1)"],
                   check=True)


def run_once(command: Command) -> Run:
    """Wall time and peak RSS of one run; output is discarded."""
    start = time.perf_counter()
    process = subprocess.Popen(command.argv, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    assert process.stderr is not None
    errors = process.stderr.read()
    _pid, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    process.stderr.close()
    if process.returncode != 0:
        raise CommandFailed(f"{command.name} exited {process.returncode}: "
                            f"{errors.decode(errors='replace').strip()[:500]}")
    return Run(seconds, usage.ru_maxrss)  # KiB on Linux


def alternate(commands: Sequence[Command], runs: int, warmup: int = 1) -> list[Measurements]:
    """``runs`` rounds, each running every command once, after ``warmup`` untimed rounds."""
    results = [Measurements(c) for c in commands]
    for _ in range(warmup):
        for command in commands:
            run_once(command)
    for round_number in range(runs):
        # Rotate the order each round so no command always runs right after another.
        shift = round_number % len(commands)
        for measurements in results[shift:] + results[:shift]:
            measurements.runs.append(run_once(measurements.command))
    return results


def table(results: Sequence[Measurements], baseline: str) -> str:
    """Medians, ratios against ``baseline`` and peak RSS as an aligned text table."""
    base = next(m for m in results if m.command.name == baseline).median_seconds
    rows = [("command", "median s", f"vs {baseline}", "min s", "max s", "peak RSS MiB")]
    for m in results:
        seconds = [r.seconds for r in m.runs]
        rows.append((m.command.name, f"{m.median_seconds:.3f}", f"{m.median_seconds / base:.2f}x",
                     f"{min(seconds):.3f}", f"{max(seconds):.3f}", f"{m.peak_rss_mib:.0f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for number, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:],
                                                                         strict=True)]
        lines.append("  ".join(cells))
        if number == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
