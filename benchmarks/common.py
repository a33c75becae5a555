"""Timing commands side by side: alternating runs, medians, peak memory.

Each command runs as a child process whose resource usage is read with
``os.wait4`` (peak resident set size).  That peak is the largest any one
process of the command reached: the kernel folds in the peaks of the
processes the child itself waited for (its workers, a forked half), but
never adds up processes that ran at the same time.  It also starts from
this script's own resident size: the child is a copy of this process until
it executes the command, and the kernel keeps that high-water mark across
the exec.  The table says both.

Commands alternate within each round, so a change in the machine's load or
page cache during the benchmark affects all of them alike; a warm-up round
first puts the input in the page cache.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path

SUCCESS_ONLY = (0,)


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

    def ratio_to(self, reference: Measurements) -> float:
        """How many times ``reference``'s median this command's median is."""
        return self.median_seconds / reference.median_seconds


class CommandFailed(Exception):
    pass


def timing_options(parser: argparse.ArgumentParser, python_help: str) -> None:
    """The options every benchmark takes: --runs, --warmup and --python."""
    parser.add_argument("--runs", type=int, default=5, help="timed rounds (default 5)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first (default 1)")
    parser.add_argument("--python", default=sys.executable, help=python_help)


def elfpatch_argv(python: str, *arguments: str) -> tuple[str, ...]:
    """The command line that runs elfpatch under ``python``."""
    return (python, "-m", "elfpatch", *arguments)


def heading(path: str, runs: int, detail: str = "") -> str:
    """What is measured and how: the input, its size and the number of rounds."""
    size = Path(path).stat().st_size
    return f"{path} ({size / 1e6:.0f} MB), {runs} alternating runs{detail}, medians"


def each_input(paths: Sequence[str], runs: int, benchmark: Callable[[str], None]) -> int:
    """Run ``benchmark`` on every path under its heading; 1 if a command failed on any."""
    status = 0
    for path in paths:
        print(heading(path, runs))
        try:
            benchmark(path)
        except CommandFailed as error:
            print(f"error: {error}", file=sys.stderr)
            status = 1
    return status


def by_name(results: Sequence[Measurements], name: str) -> Measurements:
    return next(m for m in results if m.command.name == name)


def verdict_line(ours: Measurements, reference: Measurements, target: str, met: bool) -> str:
    """Ours against the reference, its peak memory, and whether ``target`` was met."""
    return (f"{ours.command.name}: {ours.ratio_to(reference):.2f}x {reference.command.name}, "
            f"peak RSS {ours.peak_rss_mib:.0f} MiB; target \"{target}\": "
            f"{'met' if met else 'MISSED'}")


def compile_bytecode(python: str) -> None:
    """Compile elfpatch's modules for ``python``, as ``pip install`` does, before timing it.

    From a checkout (an editable install) each run would otherwise compile
    every module again when bytecode writing is off, timing the compiler.
    """
    subprocess.run([python, "-c", "import compileall, os, elfpatch; "
                    "compileall.compile_dir(os.path.dirname(elfpatch.__file__), quiet=1)"],
                   check=True)


def run_once(command: Command, accepted_exit_codes: Collection[int] = SUCCESS_ONLY) -> Run:
    """Wall time and peak RSS of one run; output is discarded.

    An exit status outside ``accepted_exit_codes`` raises CommandFailed: a
    command that stopped early would otherwise look fast.
    """
    start = time.perf_counter()
    process = subprocess.Popen(command.argv, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    assert process.stderr is not None
    errors = process.stderr.read()
    _pid, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    process.stderr.close()
    if process.returncode not in accepted_exit_codes:
        raise CommandFailed(f"{command.name} exited {process.returncode}: "
                            f"{errors.decode(errors='replace').strip()[:500]}")
    return Run(seconds, usage.ru_maxrss)  # KiB on Linux


def alternate(commands: Sequence[Command], runs: int, warmup: int = 1,
              accepted_exit_codes: Collection[int] = SUCCESS_ONLY) -> list[Measurements]:
    """``runs`` rounds, each running every command once, after ``warmup`` untimed rounds."""
    results = [Measurements(c) for c in commands]
    for _ in range(warmup):
        for command in commands:
            run_once(command, accepted_exit_codes)
    for round_number in range(runs):
        # Rotate the order each round so no command always runs right after another.
        shift = round_number % len(commands)
        for measurements in results[shift:] + results[:shift]:
            measurements.runs.append(run_once(measurements.command, accepted_exit_codes))
    return results


def table(results: Sequence[Measurements], baseline: str) -> str:
    """Medians, ratios against ``baseline`` and peak RSS as an aligned text table.

    The lines under it say what the peak RSS column covers.
    """
    base = by_name(results, baseline)
    rows = [("command", "median s", f"vs {baseline}", "min s", "max s", "peak RSS MiB")]
    for m in results:
        seconds = [r.seconds for r in m.runs]
        rows.append((m.command.name, f"{m.median_seconds:.3f}", f"{m.ratio_to(base):.2f}x",
                     f"{min(seconds):.3f}", f"{max(seconds):.3f}", f"{m.peak_rss_mib:.0f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for number, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:],
                                                                         strict=True)]
        lines.append("  ".join(cells))
        if number == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append(peak_rss_note())
    return "\n".join(lines)


def peak_rss_note() -> str:
    """What the peak RSS column covers, with the floor this script's own size puts under it."""
    own_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return ("peak RSS: the largest single process of a command, the workers it waited for "
            "included (not a sum);\n"
            f"  a figure near {own_mib:.0f} MiB is this script's own size, which each child "
            "holds until it executes the command")
