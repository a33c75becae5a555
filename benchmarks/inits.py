"""How fast `elfpatch inits --json` is next to readelf listing the relocations.

    python benchmarks/inits.py [--runs N] [--warmup N] [--phases] LIB...

For each library, times side by side (alternating, N rounds after a warm-up
round): `elfpatch inits --json LIB`, which resolves every initializer slot
through the relocations and reads each initializer's machine code, and
`readelf -W -r LIB`, which only lists the relocations, both writing to
/dev/null.  Prints the median, min and max wall time, the ratio against
readelf and each command's peak resident memory.  The target:
inits --json takes less time than readelf -W -r.

With --phases, a third command joins them: inits --json with every
initializer's effects taken as empty, which costs what the steps around the
machine-code walk cost.  Then each step of inits is timed in this
interpreter, in one process: listing the initializers, building the address
index, following every initializer's machine code, and decoding that same
code alone with capstone, the part no analysis written in Python can avoid.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    Command,
    alternate,
    by_name,
    compile_bytecode,
    each_input,
    elfpatch_argv,
    table,
    timing_options,
    verdict_line,
)

if TYPE_CHECKING:
    from elfpatch.analysis.effects import EffectsAnalyzer

OURS = "elfpatch inits --json"
BASELINE = "readelf -W -r"
TARGET = "inits --json takes less time than readelf -W -r"


WITHOUT_WALK = "inits --json, machine code not read"
# The same command with every initializer's effects taken as empty: what
# start-up, listing, the address index and the two processes cost alone.
WITHOUT_WALK_SCRIPT = """
import sys
from elfpatch.analysis import effects
from elfpatch.cli import main
nothing = effects.Effects(writes=(), reads=(), calls=(), external_calls=(), atexit=(),
                          constructs_ios_init=False, complete=True)
def no_walk(analyzer, address, **limits):
    analyzer.index.prepare()
    return nothing
effects.EffectsAnalyzer.effects = no_walk
sys.argv[0] = "elfpatch"
main()
"""


def commands_for(library: str, python: str, phases: bool) -> list[Command]:
    commands = [Command(OURS, elfpatch_argv(python, "inits", "--json", library)),
                Command(BASELINE, ("readelf", "-W", "-r", library))]
    if phases:
        commands.append(Command(WITHOUT_WALK, (python, "-c", WITHOUT_WALK_SCRIPT, "inits",
                                               "--json", library)))
    return commands


def benchmark(library: str, options: argparse.Namespace) -> None:
    results = alternate(commands_for(library, options.python, options.phases), options.runs,
                        options.warmup)
    print(table(results, BASELINE))
    ours, reference = by_name(results, OURS), by_name(results, BASELINE)
    print(verdict_line(ours, reference, TARGET, met=ours.ratio_to(reference) < 1))
    print((phases(library, options.runs) if options.phases else "") + "\n")


# -- where the time goes ------------------------------------------------------------------
LISTING, INDEX = "listing the initializers", "address index"
WALK = "following every initializer (decoding included)"
DECODING = "decoding the same code alone (capstone's Python binding)"


def decode_all(analyzer: EffectsAnalyzer, functions: Sequence[int]) -> int:
    """Decode the sized ones of ``functions``, nothing else; how many instructions."""
    decoded = 0
    for address in functions:
        found = analyzer.index.function_at(address)
        code = analyzer.index.code_at(address, found[1]) if found else None
        if code is not None:
            decoded += sum(1 for _ in analyzer.disassembler.disasm_lite(bytes(code), address))
            code.release()
    return decoded


def one_round(library: str) -> tuple[dict[str, float], int, int]:
    """CPU seconds of each step, the functions followed and the instructions decoded."""
    # Imported here: the side-by-side timing runs elfpatch under --python instead.
    from elfpatch.analysis.effects import EffectsAnalyzer
    from elfpatch.analysis.initializers import list_initializers
    from elfpatch.elf.file import ElfFile

    with ElfFile.open(library) as elf:
        start = time.process_time()
        listing = list_initializers(elf, library)
        listed = time.process_time()
        analyzer = EffectsAnalyzer(elf)
        analyzer.index.prepare()
        indexed = time.process_time()
        for entry in listing.followed:
            analyzer.effects(entry.address or 0)
        followed = time.process_time()
        functions = analyzer.functions_followed
        instructions = decode_all(analyzer, functions)
        decoded = time.process_time()
    steps = {LISTING: listed - start, INDEX: indexed - listed, WALK: followed - indexed,
             DECODING: decoded - followed}
    return steps, len(functions), instructions


def phases(library: str, runs: int) -> str:
    """Where inits spends its CPU time, one process, no fork: medians of ``runs`` rounds."""
    rounds = [one_round(library) for _ in range(runs)]
    _, functions, instructions = rounds[0]
    lines = [f"CPU seconds per step, in this process, medians of {runs} ({functions:,} "
             f"functions followed; {instructions:,} instructions in those with a size):"]
    width = max(len(name) for name in rounds[0][0])
    lines += [f"  {name.ljust(width)}  {statistics.median(r[0][name] for r in rounds):.3f}"
              for name in rounds[0][0]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("libraries", nargs="+", metavar="LIB")
    timing_options(parser, "the interpreter with elfpatch installed")
    parser.add_argument("--phases", action="store_true",
                        help="also time each step of inits in this interpreter (elfpatch "
                             "must be importable here)")
    options = parser.parse_args(argv)
    if shutil.which("readelf") is None:
        parser.error("readelf is not installed, and it is what elfpatch is measured against")
    compile_bytecode(options.python)
    return each_input(options.libraries, options.runs,
                      lambda library: benchmark(library, options))


if __name__ == "__main__":
    sys.exit(main())
