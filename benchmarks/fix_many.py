"""How `elfpatch fix` scales with the number of libraries in one set.

    python benchmarks/fix_many.py [--counts 250,500,1000,2000] [--runs N] [--python PY]

Builds one small C++ library with g++ (a few UNIQUE symbols, about 15 KB)
in a temporary folder, copies it N times into a folder (real copies: hard
links would be one library), and for each N runs, each in its own process:

* `elfpatch fix --dry-run --json DIR` (the plan, as JSON);
* `elfpatch fix -o OUT DIR` (the plan carried out, the text report).

Every copy defines the same UNIQUE symbols, so every symbol of every
library is "also defined by" the N-1 others: the case that made the
report grow with N squared.  Prints per N and command the wall time, the
peak resident memory (from the child's own rusage, as os.wait4 returns it),
the size of the report on stdout, and the time per library; a linear
command shows a flat time per library and a flat report size per library.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import CommandFailed, compile_bytecode, elfpatch_argv

DEFAULT_COUNTS = (250, 500, 1000, 2000)

LIBRARY_SOURCE = """
#include <string>
inline int& counter() { static int count = 0; return count; }
inline std::string& name() {
    static std::string text = "n" + std::to_string(counter());
    return text;
}
template <class T> T& slot() { static T value = T(3); return value; }
template <class T> struct Table { static int size; };
template <class T> int Table<T>::size = 4;
extern "C" int use_all() {
    return ++counter() + (int)name().size() + slot<int>() + (int)slot<long>()
        + Table<int>::size + Table<char>::size;
}
"""


@dataclass(frozen=True)
class Sample:
    seconds: float
    peak_rss_kib: int
    output_bytes: int


def build_library(work: Path, compiler: str) -> Path:
    source = work / "many.cpp"
    source.write_text(LIBRARY_SOURCE)
    library = work / "libmany.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-O1", "-o", str(library), str(source)],
                   check=True)
    return library


def populate(folder: Path, library: Path, count: int) -> None:
    """``count`` distinct copies of ``library`` in ``folder`` (made once, reused)."""
    folder.mkdir(exist_ok=True)
    existing = len(list(folder.iterdir()))
    for index in range(existing, count):
        shutil.copyfile(library, folder / f"libmany{index:05d}.so")


def run_once(argv: Sequence[str], stdout_path: Path) -> Sample:
    """Wall time, peak RSS and stdout size of one run; a failure raises CommandFailed."""
    start = time.perf_counter()
    with stdout_path.open("wb") as stdout:
        process = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE)
        assert process.stderr is not None
        errors = process.stderr.read()
        _pid, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    process.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise CommandFailed(f"{' '.join(argv[2:5])} exited {code}: "
                            f"{errors.decode(errors='replace').strip()[:500]}")
    return Sample(seconds, usage.ru_maxrss, stdout_path.stat().st_size)


def measure(name: str, argv: Sequence[str], runs: int, work: Path,
            before: Path | None = None) -> Sample:
    """The median time of ``runs`` runs, their largest peak RSS and report size."""
    samples = []
    for _ in range(runs):
        if before is not None:
            shutil.rmtree(before, ignore_errors=True)
        samples.append(run_once(argv, work / f"{name}.out"))
    return Sample(statistics.median(s.seconds for s in samples),
                  max(s.peak_rss_kib for s in samples),
                  max(s.output_bytes for s in samples))


def row(count: int, name: str, sample: Sample) -> str:
    per_library_ms = 1000 * sample.seconds / count
    return (f"{count:>6}  {name:<20} {sample.seconds:>9.2f} {sample.peak_rss_kib / 1024:>9.0f} "
            f"{sample.output_bytes / 1e6:>10.2f} {per_library_ms:>8.2f} "
            f"{sample.output_bytes / count:>9.0f}")


HEADER = (f"{'N':>6}  {'command':<20} {'wall s':>9} {'RSS MiB':>9} {'report MB':>10} "
          f"{'ms/lib':>8} {'bytes/lib':>9}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", default=",".join(map(str, DEFAULT_COUNTS)),
                        help="comma-separated numbers of copies (default 250,500,1000,2000)")
    parser.add_argument("--runs", type=int, default=1, help="runs per N and command (median)")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter with elfpatch installed")
    parser.add_argument("--cxx", default=os.environ.get("CXX", "g++"), help="C++ compiler")
    parser.add_argument("--work-dir", help="where the copies go (default: under $TMPDIR)")
    options = parser.parse_args(argv)
    if shutil.which(options.cxx) is None:
        print(f"error: {options.cxx} is not installed", file=sys.stderr)
        return 1
    counts = sorted(int(c) for c in options.counts.split(","))
    compile_bytecode(options.python)
    with tempfile.TemporaryDirectory(prefix="elfpatch-many-", dir=options.work_dir) as name:
        work = Path(name)
        library = build_library(work, options.cxx)
        print(f"{library.stat().st_size / 1e3:.0f} KB library copied N times; "
              f"{options.runs} run(s) per N, median wall time, largest peak RSS\n")
        print(HEADER)
        try:
            for count in counts:
                folder = work / "copies"
                populate(folder, library, count)
                out = work / "fixed"
                dry = measure("dry-run", elfpatch_argv(options.python, "fix", "--dry-run",
                                                       "--json", str(folder)), options.runs,
                              work)
                print(row(count, "fix --dry-run --json", dry), flush=True)
                fixed = measure("fix", elfpatch_argv(options.python, "fix", "-o", str(out),
                                                     str(folder)), options.runs, work, out)
                print(row(count, "fix -o OUT", fixed), flush=True)
        except CommandFailed as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
