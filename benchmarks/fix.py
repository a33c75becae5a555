"""How fast `elfpatch fix` is next to copying the file, and next to doing it with LIEF.

    python benchmarks/fix.py [--runs N] [--lief-runs N] [--modes local,...] LIB

For each mode, times side by side (alternating, N rounds after a warm-up
round): `elfpatch fix --to MODE -o NEW LIB`, `cp LIB NEW`, and a LIEF
script that parses LIB, sets the binding of every UNIQUE symbol and writes
NEW, each in its own process.  NEW is deleted (and the disk synced) before
every run, so each command writes a fresh file.  Prints the median wall
time, the ratio against cp and each command's peak resident memory (from
the child's rusage).  The goal for `--to local`: within 3x of cp, under
300 MiB peak RSS.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    Command,
    CommandFailed,
    Measurements,
    by_name,
    compile_bytecode,
    elfpatch_argv,
    heading,
    run_once,
    table,
    timing_options,
)

LIEF_FIX = """
import sys
import lief
lief.logging.disable()
mode, source, destination = sys.argv[1:4]
binding = lief.ELF.Symbol.BINDING
target = {"local": binding.LOCAL, "weak-hidden": binding.WEAK, "global": binding.GLOBAL}[mode]
elf = lief.parse(source)
for symbols in (elf.dynamic_symbols, elf.symtab_symbols):
    for symbol in symbols:
        if symbol.binding == binding.GNU_UNIQUE:
            symbol.binding = target
            if mode == "weak-hidden":
                symbol.visibility = lief.ELF.Symbol.VISIBILITY.HIDDEN
elf.write(destination)
"""

MODES = ("local", "weak-hidden", "global")
BASELINE = "cp"
LIEF = "LIEF parse+bind+write"
TARGET_RATIO = 3.0
TARGET_RSS_MIB = 300


def commands_for(library: str, mode: str, output: str, python: str) -> list[Command]:
    return [
        Command(f"elfpatch fix --to {mode}", elfpatch_argv(python, "fix", "--to", mode,
                                                           "-o", output, library)),
        Command(BASELINE, ("cp", library, output)),
        Command(LIEF, (python, "-c", LIEF_FIX, mode, library, output)),
    ]


def fresh(output: Path, sync: bool) -> None:
    """Remove the previous output; with ``sync``, also write back what the last run left dirty."""
    output.unlink(missing_ok=True)
    if sync:
        os.sync()


def measure(commands: Sequence[Command], rounds: dict[str, int], warmup: int, output: Path,
            sync: bool) -> list[Measurements]:
    """Alternating rounds; a command takes part in as many rounds as ``rounds`` gives it."""
    results = [Measurements(c) for c in commands]
    for _ in range(warmup):
        for m in results:
            if rounds[m.command.name] > 1:  # the slow one is not worth warming up
                fresh(output, sync)
                run_once(m.command)
    for number in range(max(rounds.values())):
        shift = number % len(results)
        for m in results[shift:] + results[:shift]:
            if number < rounds[m.command.name]:
                fresh(output, sync)
                m.runs.append(run_once(m.command))
    fresh(output, sync=False)
    return results


def verdict(results: Sequence[Measurements], mode: str) -> str:
    ours = results[0]
    ratio = ours.ratio_to(by_name(results, BASELINE))
    text = f"elfpatch --to {mode}: {ratio:.2f}x cp, peak RSS {ours.peak_rss_mib:.0f} MiB"
    if mode == "local":
        speed = "within" if ratio <= TARGET_RATIO else "OVER"
        memory = "under" if ours.peak_rss_mib < TARGET_RSS_MIB else "OVER"
        text += (f" ({speed} the {TARGET_RATIO:g}x target, {memory} {TARGET_RSS_MIB} MiB)")
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("library", metavar="LIB")
    timing_options(parser, "the interpreter with elfpatch and LIEF installed")
    parser.add_argument("--lief-runs", type=int, default=None,
                        help="timed rounds for LIEF (default: --runs; 0 leaves it out)")
    parser.add_argument("--modes", default=",".join(MODES),
                        help="comma-separated (default: all three)")
    parser.add_argument("--work-dir", help="where NEW is written (default: a temporary folder "
                        "under $TMPDIR)")
    parser.add_argument("--no-sync", action="store_true",
                        help="do not sync the disk between runs")
    options = parser.parse_args(argv)
    compile_bytecode(options.python)
    library = str(Path(options.library).resolve())
    lief_runs = options.runs if options.lief_runs is None else options.lief_runs
    status = 0
    with tempfile.TemporaryDirectory(prefix="elfpatch-bench-", dir=options.work_dir) as work:
        output = Path(work) / "NEW.so"
        print(heading(library, options.runs, f" (LIEF {lief_runs})") + "\n")
        for mode in options.modes.split(","):
            commands = commands_for(library, mode, str(output), options.python)
            rounds = {c.name: options.runs for c in commands}
            if lief_runs == 0:
                del commands[-1], rounds[LIEF]
            else:
                rounds[LIEF] = lief_runs
            try:
                results = measure(commands, rounds, options.warmup, output, not options.no_sync)
            except CommandFailed as error:
                print(f"error: {error}", file=sys.stderr)
                status = 1
                continue
            print(f"--to {mode}")
            print(table(results, BASELINE))
            print(verdict(results, mode) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
