"""Does glibc unload each library after dlclose?  The real loader against elfpatch's verdict.

Each library is opened in a fresh process of the chosen host (a Python
interpreter, a plain C program or a C++ program that has libstdc++ loaded
from the start): dlopen(RTLD_LAZY | RTLD_LOCAL) (--now: RTLD_NOW, as
Python's import), dlclose, then
/proc/self/maps says whether the file is still mapped.  The verdict of
``elfpatch.loader.dlopen`` for the same host is printed beside it, and the
agreement over the libraries that load at the end.

    python benchmarks/unload_probe.py [--host python|c|c++] PATH...

PATH may be a library, a folder (every ELF file below it) or a wheel
(unpacked into a temporary folder first, so that $ORIGIN and RPATH work).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

HOST_SOURCE = r"""
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#ifdef __cplusplus
#include <string>
static std::string keep_libstdcxx("libstdc++ is loaded from the start");
#endif

/* Whether a file with this device and inode is still mapped. */
static int mapped(const struct stat *file) {
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[4096];
    int found = 0;
    while (!found && fgets(line, sizeof line, maps)) {
        unsigned major, minor;
        unsigned long inode;
        if (sscanf(line, "%*s %*s %*s %x:%x %lu", &major, &minor, &inode) == 3)
            found = inode == file->st_ino && makedev(major, minor) == file->st_dev;
    }
    fclose(maps);
    return found;
}

int main(int argc, char **argv) {
    struct stat file;
    if (argc != 2 || stat(argv[1], &file) != 0) return 2;
    if (mapped(&file)) { printf("error\talready mapped before dlopen\n"); return 0; }
    void *handle = dlopen(argv[1], (getenv("PROBE_NOW") ? RTLD_NOW : RTLD_LAZY) | RTLD_LOCAL);
    if (!handle) { printf("error\t%s\n", dlerror()); return 0; }
    dlclose(handle);
    printf("%s\n", mapped(&file) ? "kept" : "unloaded");
    return 0;
}
"""

PYTHON_PROBE = r"""
import ctypes, os, sys
# PyDLL holds the GIL through each call, as import holds it around dlopen: initializers
# and destructors that touch Python objects (a pybind11 module's statics) need it.
libc = ctypes.PyDLL(None)
libc.dlopen.restype = ctypes.c_void_p
libc.dlopen.argtypes = [ctypes.c_char_p, ctypes.c_int]
libc.dlerror.restype = ctypes.c_char_p
libc.dlclose.argtypes = [ctypes.c_void_p]
path = sys.argv[1]
file = os.stat(path)


def mapped():
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            major, minor = (int(part, 16) for part in fields[3].split(":"))
            if int(fields[4]) == file.st_ino and os.makedev(major, minor) == file.st_dev:
                return True
    return False


if mapped():  # ctypes itself needs libffi
    print("error\talready mapped before dlopen")
    sys.exit(0)
mode = os.RTLD_NOW if os.environ.get("PROBE_NOW") else os.RTLD_LAZY
handle = libc.dlopen(os.fsencode(path), mode | os.RTLD_LOCAL)
if not handle:
    print("error\t" + libc.dlerror().decode("utf-8", "replace"))
    sys.exit(0)
libc.dlclose(handle)
print("kept" if mapped() else "unloaded")
"""


ALREADY_MAPPED = "already mapped before dlopen"


@dataclass(frozen=True)
class Probe:
    """What the real loader did with one library."""

    loaded: bool
    unloaded: bool | None  # None when it did not load
    error: str = ""
    debug: str = ""  # LD_DEBUG's output, when asked for
    preloaded: bool = False  # the probe's host had it mapped already (ctypes needs libffi)


def build_host(kind: str, folder: Path) -> list[str]:
    """The command that runs the probe in a ``kind`` host (python, c, c++)."""
    if kind == "python":
        return [sys.executable, "-I", "-S", "-c", PYTHON_PROBE]
    compiler, language = ("g++", "c++") if kind == "c++" else ("gcc", "c")
    program = folder / f"probe-{language}"
    command = [compiler, "-O1", "-x", language, "-", "-o", str(program),
               "-Wl,--no-as-needed", "-ldl"]
    subprocess.run(command, input=HOST_SOURCE, text=True, check=True, timeout=120)
    return [str(program)]


def probe(host_command: Sequence[str], library: Path | str, *, debug: str = "",
          now: bool = False, timeout: float = 120) -> Probe:
    """dlopen, dlclose and /proc/self/maps of ``library`` in a fresh host process."""
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith("LD_")}
    if debug:  # LD_DEBUG categories, e.g. "bindings,files"
        environment["LD_DEBUG"] = debug
    if now:  # dlopen(RTLD_NOW), as Python's import does
        environment["PROBE_NOW"] = "1"
    done = subprocess.run([*host_command, str(library)], capture_output=True, text=True,
                          env=environment, timeout=timeout, check=False)
    lines = done.stdout.strip().splitlines()
    answer = lines[-1] if lines else f"error\thost exited {done.returncode}"
    if answer == "error\t" + ALREADY_MAPPED:
        return Probe(False, None, ALREADY_MAPPED, done.stderr, preloaded=True)
    if answer.startswith("error"):
        return Probe(False, None, answer.partition("\t")[2], done.stderr)
    return Probe(True, answer == "unloaded", "", done.stderr)


def elf_files(path: Path) -> Iterator[Path]:
    if not path.is_dir():
        candidates, links = [path.resolve()], True
    else:
        candidates, links = sorted(path.rglob("*")), False
    for candidate in candidates:
        if candidate.is_file() and (links or not candidate.is_symlink()):
            with candidate.open("rb") as handle:
                head = handle.read(18)
            if head[:4] == b"\x7fELF" and head[16] == 3:  # ET_DYN
                yield candidate


def unpacked(path: Path, scratch: Path) -> Path:
    if path.suffix != ".whl":
        return path
    target = scratch / path.stem
    with zipfile.ZipFile(path) as wheel:
        wheel.extractall(target)
    return target


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--host", default="python", choices=("python", "c", "c++"))
    parser.add_argument("--json", action="store_true", help="one JSON line per library")
    parser.add_argument("--now", action="store_true",
                        help="dlopen with RTLD_NOW, as Python's import does")
    arguments = parser.parse_args(argv)

    from elfpatch.loader.dlopen import LoadHost
    from elfpatch.loader.host import HostProfile
    from elfpatch.service.load import load_verdict

    profile = HostProfile.of_this_host()
    host = dataclasses.replace(LoadHost.named(arguments.host), bind_now=arguments.now)
    scratch = Path(tempfile.mkdtemp(prefix="unload-probe-"))
    agree = disagree = failed = skipped = 0
    try:
        command = build_host(arguments.host, scratch)
        for given in arguments.paths:
            for library in elf_files(unpacked(given, scratch)):
                real = probe(command, library, now=arguments.now)
                if real.preloaded or real.error.startswith("host exited"):
                    skipped += 1  # nothing to compare: mapped before, or the host died
                    continue
                try:
                    verdict = load_verdict(library, host, profile)
                except Exception as error:  # a reader failure is a finding too
                    print(f"{library}: elfpatch failed: {error}", file=sys.stderr)
                    failed += 1
                    continue
                same = (real.loaded == verdict.loads
                        and (not real.loaded or real.unloaded == verdict.unloads))
                if real.loaded:
                    agree += same
                    disagree += not same
                record = {"path": str(library), "loaded": real.loaded,
                          "unloaded": real.unloaded, "predicted_loads": verdict.loads,
                          "predicted_unloads": verdict.unloads, "agree": same,
                          "blockers": [b.kind for b in verdict.blockers],
                          "error": real.error, "predicted_errors": list(verdict.load_errors)}
                if arguments.json:
                    print(json.dumps(record))
                elif not same:
                    print(f"DIFFER {library}: real {record['loaded']}/{record['unloaded']} "
                          f"predicted {verdict.loads}/{verdict.unloads} "
                          f"{record['blockers']} {real.error} {verdict.load_errors[:2]}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    total = agree + disagree
    share = 100.0 * agree / total if total else 100.0
    print(f"agreement on the libraries that load: {agree}/{total} ({share:.1f}%); "
          f"elfpatch failed on {failed}; {skipped} not compared (mapped before, "
          "or the host died)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
