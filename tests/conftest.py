"""Shared pytest fixtures (compilers, fixture builds, command helpers) and the suite's rules:
which skips may stand (``ALLOWED_SKIPS``) and which tests are slow (``SLOW_TESTS``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest

# First: from a plain checkout it makes ``elfpatch.fixtures`` importable.
from support import checkout  # noqa: F401  # isort: skip
from elfpatch.fixtures import build  # isort: skip
from support import tools  # isort: skip

# CI sets this: every skip then fails unless ALLOWED_SKIPS names it, so a green run
# proves that every compiler, emulator and tool the tests compare with ran.
REQUIRE_TOOLS = "ELFPATCH_REQUIRE_TOOLS"

# The skips no package removes (reason pattern -> why), accepted even in CI.  Any
# other skip must name the package that removes it ("(apt-get install X)" or
# "(pip install X)", see support/tools.py), or it fails.
ALLOWED_SKIPS = {
    r"^set ELFPATCH_(TORCH_WHEEL|TORCH_LIB|SARIF_WHEEL) ":
        "opt-in oracles on real wheels (PyTorch's is 500 MB), which are not part of the "
        "repository",
    r"^running as root: |is readable here$|is not there to stand for an unreadable file$|"
    r"^needs root: ":
        "permission tests: root reads every file, and the kernel file that stands for an "
        "unreadable one may be missing or readable in a container; device nodes and private "
        "mount namespaces need root",
    r"linker ignores -z pack-relative-relocs$|linker did not pack relative relocations$|"
    r"^the linker made no \.plt":
        "what a cross linker emits depends on its binutils release (Debian 12's aarch64 and "
        "s390x linkers do not pack relative relocations), not on what is installed",
    r"does not reach x86-64-v2|^no known \$PLATFORM|^no /dev/full$|^no fork here|"
    r"^not a glibc system$|needs Python 3\.11$":
        "properties of the machine, the C library or the Python version, not of its packages",
}


def skip_problem(reason: str, required: bool) -> str | None:
    """Why a skip with ``reason`` is a failure here, or None when it may stand."""
    if any(re.search(pattern, reason) for pattern in ALLOWED_SKIPS):
        return None
    if required:
        return f"{REQUIRE_TOOLS} is set, so only the skips in conftest's ALLOWED_SKIPS may stand"
    if not tools.names_a_package(reason):
        return "a skip must name the package that removes it, as support/tools.py's helpers do"
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    reason = reason.removeprefix("Skipped: ")
    problem = skip_problem(reason, bool(os.environ.get(REQUIRE_TOOLS)))
    if problem is not None:
        report.outcome = "failed"
        report.longrepr = f"{problem}; skipped: {reason}"


# The slowest tests, measured with --durations on this suite's 2-core machine (seconds:
# setup + call, under load), marked ``slow``.  ``pytest -m "not slow"`` leaves them out
# and still runs tests of every module; CI runs everything.  Node id prefixes.
SLOW_TESTS = (
    "tests/test_fuzz_fix.py::test_fix_refuses_cleanly_or_writes_what_readelf_accepts",  # 54
    "tests/test_ci_requirements.py::test_without_",  # 43 + 5: the real suite, twice
    "tests/test_wheel_fuzz.py::test_damaged_wheels_give_clean_errors_only",  # 30
    "tests/test_wheel_hostile.py::test_an_honest_1_gib_member",  # 23
    "tests/test_wheel_hostile.py::test_a_declared_6_gib_member",  # 5
    "tests/test_wheel_hostile.py::test_a_small_member_that_inflates_to_2_gib",  # 2
    "tests/test_wheel_hostile.py::test_two_runs_into_one_outdir_at_once",  # 2
    "tests/test_fix_sets.py::test_a_killed_fix_leaves_each_file",  # 3 x 7
    "tests/test_benchmarks.py",  # 18: the benchmark scripts, not elfpatch
    "tests/test_check_wheel.py::test_repaired_wheel_installs_imports_and_passes",  # 17
    "tests/test_check_wheel.py::test_allow_list_and_policy_from_pyproject",  # 7
    "tests/test_environment.py::test_a_wheel_does_not_clash_with_its_installed_copy",  # 17
    "tests/test_closure.py::test_graph_order_is_glibcs",  # 14 (its programs) + 2
    "tests/test_api.py::test_the_readme_example_runs_from_a_fresh_install",  # 13
    "tests/test_inits_oracles.py::test_asan_",  # 18 (the ASan builds) + 12
    "tests/test_check_gate.py::test_check_shows_progress_on_a_terminal_only",  # 4
    "tests/test_check_gate.py::test_paths_given_with_environment_are_always_checked",  # 2 x 2
    "tests/test_check_formats.py::test_junit_of_a_real_wheel",  # 4
    "tests/test_wheel_repair.py::test_a_large_library_keeps_its_untouched_compressed",  # 3
    "tests/test_wheel_repair.py::test_progress_only_on_a_terminal_and_not_with_quiet",  # 3
    "tests/test_wheel_repair.py::test_the_benchmark_script_runs_end_to_end",  # 3
    "tests/test_wheel_repair.py::test_a_killed_run_leaves_nothing",  # 2
    "tests/test_fix_report_size.py::test_the_benchmark_runs_end_to_end",  # 2
    "tests/test_ci_requirements.py::test_every_slow_entry_names_tests",  # 8: collects all
    "tests/test_ci_recipes.py::test_the_audit_fails_a_unique_wheel",  # 10: README's CI recipes
    "tests/test_ci_recipes.py::test_the_repair_leaves_one_wheel_or_nothing",  # 4
    "tests/test_output_size.py::test_a_wheel_without_unique_symbols_is_one_line",  # 5
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith(SLOW_TESTS):
            item.add_marker(pytest.mark.slow)


def require_tool(name: str) -> str:
    return tools.require_tool(name)


@pytest.fixture(scope="session")
def cxx() -> build.Toolchain:
    toolchain = build.host_toolchain()
    if not build.compiler_available(toolchain):
        pytest.skip(f"no C++ compiler: {toolchain.cxx} is not installed (apt-get install g++)")
    return toolchain


@pytest.fixture(scope="session")
def aarch64() -> build.Toolchain:
    toolchain = build.cross_toolchain("aarch64")
    if toolchain is None:
        pytest.skip("aarch64-linux-gnu-g++ is not installed "
                    "(apt-get install g++-aarch64-linux-gnu)")
    return toolchain


ScenarioBuilder = Callable[..., build.ScenarioBuild]


@pytest.fixture(scope="session")
def scenario_build(cxx: build.Toolchain) -> ScenarioBuilder:
    """``scenario(name, variant="plain", toolchain=None)``: built once per session."""
    built: dict[tuple[str, str, build.Toolchain | None], build.ScenarioBuild] = {}

    def get(name: str, variant: str = build.VARIANT_PLAIN,
            toolchain: build.Toolchain | None = None) -> build.ScenarioBuild:
        key = (name, variant, toolchain)
        if key not in built:
            built[key] = build.build_scenario(name, variant, toolchain)
        return built[key]

    return get


def run_elfpatch(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The installed command line, in a subprocess, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "elfpatch", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=600)


# The wheel the check tests gate: two UNIQUE definitions, one static initializer,
# one exit-time destructor.
WHEEL_SETUP = """
from setuptools import Extension, setup
setup(name="uniqpkg", version="1.0", packages=["uniqpkg"],
      ext_modules=[Extension("uniqpkg._native", ["native.cpp"], language="c++")])
"""

WHEEL_NATIVE = r"""
#include <Python.h>
#include <string>
inline int& calls() { static int count = 0; return count; }
template <class T> struct Registry { static int size; };
template <class T> int Registry<T>::size = 40;
std::string module_name("uniqpkg");  // constructed at load, destroyed at exit
static PyObject* bump(PyObject*, PyObject*) {
    return PyLong_FromLong(++calls() + Registry<int>::size + (long)module_name.size());
}
static PyMethodDef methods[] = {{"bump", bump, METH_NOARGS, nullptr},
                                {nullptr, nullptr, 0, nullptr}};
static PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", nullptr, -1, methods};
PyMODINIT_FUNC PyInit__native() { return PyModule_Create(&module); }
"""


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory, cxx: object) -> Path:
    """A real wheel around a gcc-built extension with two UNIQUE symbols (built once)."""
    tools.require_module("setuptools")
    root = tmp_path_factory.mktemp("wheel")
    (root / "src" / "uniqpkg").mkdir(parents=True)
    (root / "src" / "setup.py").write_text(WHEEL_SETUP)
    (root / "src" / "native.cpp").write_text(WHEEL_NATIVE)
    (root / "src" / "uniqpkg" / "__init__.py").write_text("")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                            "--no-build-isolation", "--no-index", "-w", str(root / "dist"),
                            str(root / "src")], capture_output=True, text=True)
    if built.returncode != 0:
        pytest.skip(f"cannot build a wheel offline here (pip install setuptools wheel): "
                    f"{built.stderr.strip()[-300:]}")
    return next((root / "dist").glob("*.whl"))
