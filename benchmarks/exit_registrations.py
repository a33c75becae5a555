"""What elfpatch says each object registers to run at exit, against a real process.

Every ``__cxa_atexit`` call a process makes is logged by a small library
preloaded in front of libc's (built here with gcc): the function registered
and the object it is handed, each as a file and an offset in it.  A library
is opened with dlopen in a plain C host (its folder on the library path); a
program is run with ``--run``, without arguments.  Beside that,
``elfpatch inits --json`` lists the object of each exit-time destructor it
found.  Per file:

- ``at run time``: registrations whose object lies in the file;
- ``elfpatch``: its exit-time-destructor registrations, how many objects they
  name, and how many name none by address (an object the code reaches
  through the GOT, which another object's copy may interpose);
- ``counted twice``: registrations elfpatch lists for an object it lists
  already (a function-local static is registered once, by the first
  initializer to reach it);
- ``not at run time`` / ``not found``: objects only one side names (code
  ``inits`` does not follow, or paths the process did not take).

    python benchmarks/exit_registrations.py [--run] [--json] PATH...
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

SHIM_SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

/* One line per registration: file and offset of the function, of the object. */
int __cxa_atexit(void (*function)(void *), void *object, void *dso) {
    static int (*real)(void (*)(void *), void *, void *);
    static FILE *log;
    if (!real) real = (int (*)(void (*)(void *), void *, void *))dlsym(RTLD_NEXT, "__cxa_atexit");
    if (!log) log = fopen(getenv("EXIT_REGISTRATIONS_LOG"), "w");
    Dl_info code, data;
    int known_code = dladdr((void *)function, &code), known_data = object && dladdr(object, &data);
    fprintf(log, "%s\t%lx\t%s\t%lx\n", known_code ? code.dli_fname : "?",
            known_code ? (unsigned long)((char *)function - (char *)code.dli_fbase) : 0UL,
            known_data ? data.dli_fname : "?",
            known_data ? (unsigned long)((char *)object - (char *)data.dli_fbase) : 0UL);
    fflush(log);
    return real(function, object, dso);
}
"""

HOST_SOURCE = r"""
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    if (argc != 2) return 2;
    if (!dlopen(argv[1], RTLD_NOW | RTLD_LOCAL)) { fprintf(stderr, "%s\n", dlerror()); return 3; }
    return 0;
}
"""


def build(source: str, output: Path, *flags: str) -> Path:
    """``source`` (C) compiled with gcc into ``output``."""
    file = output.with_suffix(".c")
    file.write_text(source)
    subprocess.run(["gcc", "-O2", *flags, "-o", str(output), str(file), "-ldl"], check=True)
    return output


def registered(path: Path, shim: Path, host: Path | None, scratch: Path) -> list[int]:
    """Offsets in ``path`` of the objects a real process registers destructors for, in
    the order it registers them: ``path`` run (``host`` None) or opened by ``host``,
    with ``shim`` preloaded."""
    log = scratch / "registrations.log"
    environment = dict(os.environ, LD_PRELOAD=str(shim), EXIT_REGISTRATIONS_LOG=str(log),
                       LD_LIBRARY_PATH=os.pathsep.join(
                           [str(path.resolve().parent), os.environ.get("LD_LIBRARY_PATH", "")]))
    command = [str(host)] if host is not None else []
    command.append(str(path.resolve()))
    log.write_text("")
    # A program runs in its own folder, where a plugin host finds its plugins.
    result = subprocess.run(command, env=environment, capture_output=True, text=True,
                            timeout=600, cwd=path.resolve().parent)
    if result.returncode != 0:
        raise SystemExit(f"{path}: the process failed ({result.returncode}): "
                         f"{result.stderr.strip()[-500:]}")
    target = os.path.realpath(path)
    found = []
    for line in log.read_text().splitlines():
        _code, _at, data, offset = line.split("\t")
        if data != "?" and os.path.realpath(data) == target:
            found.append(int(offset, 16))
    return found


def reported(path: Path) -> list[int | None]:
    """The object address of each exit-time destructor ``inits`` lists (None: not known)."""
    result = subprocess.run([sys.executable, "-m", "elfpatch", "inits", "--json", "-q",
                             str(path)], capture_output=True, text=True)
    if result.returncode not in (0, 1):
        raise SystemExit(f"{path}: elfpatch inits failed: {result.stderr.strip()}")
    (record,) = json.loads(result.stdout)["files"]
    return [risk.get("object_address") for risk in record["risks"]
            if risk["kind"] == "exit-time-destructor"]


def compare(path: Path, shim: Path, host: Path | None, scratch: Path) -> dict[str, int]:
    at_run_time = registered(path, shim, host, scratch)
    listed = reported(path)
    objects = Counter(address for address in listed if address is not None)
    real = set(at_run_time)
    return {
        "at_run_time": len(at_run_time),
        "elfpatch": len(listed),
        "elfpatch_objects": len(objects),
        "without_address": listed.count(None),
        "counted_twice": sum(count - 1 for count in objects.values()),
        "not_at_run_time": len(set(objects) - real),
        "not_found": len(real - set(objects)),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", type=Path)
    parser.add_argument("--run", action="store_true",
                        help="run each path as a program instead of opening it with dlopen")
    parser.add_argument("--json", action="store_true", help="one JSON object per path")
    arguments = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        shim = build(SHIM_SOURCE, scratch / "shim.so", "-shared", "-fPIC")
        host = None if arguments.run else build(HOST_SOURCE, scratch / "host")
        for path in arguments.paths:
            report(path, compare(path, shim, host, scratch), arguments.json)
    return 0


def report(path: Path, found: dict[str, int], as_json: bool) -> None:
    if as_json:
        print(json.dumps({"path": str(path), **found}))
        return
    print(f"{path}: at run time {found['at_run_time']}; elfpatch {found['elfpatch']} "
          f"({found['elfpatch_objects']} objects, {found['without_address']} without an "
          f"address, counted twice {found['counted_twice']}); "
          f"not at run time {found['not_at_run_time']}; not found {found['not_found']}")

if __name__ == "__main__":
    sys.exit(main())
