"""How fast `elfpatch inits --json` is next to readelf listing the relocations.

    python benchmarks/inits.py [--runs N] [--warmup N] [--phases] LIB...

For each library, times side by side (alternating, N rounds after a warm-up
round): `elfpatch inits --json LIB`, which resolves every initializer slot
through the relocations and reads the machine code of each initializer and
each destructor they register, `elfpatch inits --json --list-only LIB`,
which only lists them, `elfpatch inits LIB`, the text report of the same
analysis, and `readelf -W -r LIB`, which only lists the relocations, all
writing to /dev/null.  Prints the median, min and max wall time, the ratio
against readelf and each command's peak resident memory.  The targets:
inits --json within 3x readelf -W -r, the listing alone within 1.0x, and
the text report within 1.1x of the JSON one (rendering thousands of
exit-time destructors is no analysis).  On a program built with -g
(``debug_program.py`` builds one of 284 MB) the listing has a target of its
own in seconds, readelf -W -r having next to nothing to list:
``--listing-seconds 1`` checks it.

With --phases, each step of inits is then timed in this interpreter, in one
process: listing the initializers, building the address index, following
every initializer's machine code, decoding that same code alone with
capstone (the part no analysis written in Python can avoid), and the whole
analysis (initializers, the destructors they register, thread bodies, what
functions do with the pointers passed to them).
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
RATIO = 3.0
TARGET = f"inits --json within {RATIO:g}x readelf -W -r"
# The listing alone: start-up, slots, names and translation units.
WITHOUT_WALK = "inits --json, machine code not read"
LISTING_RATIO = 1.0
LISTING_TARGET = f"inits --json --list-only within {LISTING_RATIO:.1f}x readelf -W -r"
TEXT = "elfpatch inits (text)"
TEXT_RATIO = 1.1
TEXT_TARGET = f"inits within {TEXT_RATIO:g}x inits --json"


def commands_for(library: str, python: str) -> list[Command]:
    return [Command(OURS, elfpatch_argv(python, "inits", "--json", library)),
            Command(BASELINE, ("readelf", "-W", "-r", library)),
            Command(WITHOUT_WALK, elfpatch_argv(python, "inits", "--json", "--list-only",
                                                library)),
            Command(TEXT, elfpatch_argv(python, "inits", library))]


def benchmark(library: str, options: argparse.Namespace) -> None:
    results = alternate(commands_for(library, options.python), options.runs, options.warmup)
    print(table(results, BASELINE))
    ours, reference = by_name(results, OURS), by_name(results, BASELINE)
    listing = by_name(results, WITHOUT_WALK)
    print(verdict_line(ours, reference, TARGET, met=ours.ratio_to(reference) <= RATIO))
    print(verdict_line(listing, reference, LISTING_TARGET,
                       met=listing.ratio_to(reference) <= LISTING_RATIO))
    text = by_name(results, TEXT)
    print(verdict_line(text, ours, TEXT_TARGET, met=text.ratio_to(ours) <= TEXT_RATIO))
    if options.listing_seconds is not None:
        met = listing.median_seconds <= options.listing_seconds
        print(f"{listing.command.name}: {listing.median_seconds:.3f} s, peak RSS "
              f"{listing.peak_rss_mib:.0f} MiB; target \"within {options.listing_seconds:g} s\": "
              f"{'met' if met else 'MISSED'}")
    print((phases(library, options.runs) if options.phases else "") + "\n")


# -- where the time goes ------------------------------------------------------------------
LISTING, INDEX = "listing the initializers", "address index"
WALK = "following every initializer (decoding included)"
DECODING = "decoding the same code alone (capstone's Python binding)"
WHOLE = "the whole analysis, with destructors (one process)"


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
    from elfpatch.analysis import init_order
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
            analyzer.effects(entry.address or 0, settle=False)
        followed = time.process_time()
        functions = analyzer.functions_followed
        instructions = decode_all(analyzer, functions)
        decoded = time.process_time()
        # No ``alongside`` given: both halves run here in turn, so this
        # process's CPU time is all there is.
        init_order.analyse_object_fully(elf, library, listing=listing)
        whole = time.process_time()
    steps = {LISTING: listed - start, INDEX: indexed - listed, WALK: followed - indexed,
             DECODING: decoded - followed, WHOLE: whole - decoded}
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
    parser.add_argument("--listing-seconds", type=float, default=None, metavar="S",
                        help="also check that the listing alone takes at most S seconds "
                             "(the target on a -g program: 1)")
    options = parser.parse_args(argv)
    if shutil.which("readelf") is None:
        parser.error("readelf is not installed, and it is what elfpatch is measured against")
    compile_bytecode(options.python)
    return each_input(options.libraries, options.runs,
                      lambda library: benchmark(library, options))


if __name__ == "__main__":
    sys.exit(main())
