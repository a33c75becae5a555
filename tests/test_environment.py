"""``check --environment`` and ``--python``: UNIQUE clashes with what an interpreter has installed.

A throwaway venv (``python -m venv``) gets two small wheels, ``envpkg`` and
``envtwin``, each holding a g++-built library whose inline function has a
static local: the same ``STB_GNU_UNIQUE`` symbol, ``calls()::count``, that
the ``wheel`` fixture's extension defines.  pip installs them, so the
libraries are found the way users' are, through each distribution's
RECORD.  Checked: the installed libraries are found (the two installed
distributions clash with each other, named by their installed paths), a
wheel given on the command line clashes with them (and not with its own
installed copy), and an interpreter that is not one is one line and exit 2.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import run_elfpatch
from elfpatch.fixtures import build
from support.build import invoke

SHARED = "_ZZ5callsvE5count"  # calls()::count, also in the wheel fixture's extension

LIBRARY = {"env.cpp": """
inline int& calls() { static int count = 0; return count; }
extern "C" int bump() { return ++calls(); }
"""}


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"


def _wheel(name: str, library: Path, folder: Path) -> Path:
    """A minimal pure-tagged wheel holding ``library`` (RECORD written here, not by elfpatch)."""
    info = f"{name}-1.0.dist-info"
    members = {f"{name}/__init__.py": b"",
               f"{name}/lib{name}.so": library.read_bytes(),
               f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
               f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\n"
                                b"Tag: py3-none-any\n"}
    rows = [f"{member},{_record_hash(data)},{len(data)}" for member, data in members.items()]
    members[f"{info}/RECORD"] = ("\n".join([*rows, f"{info}/RECORD,,"]) + "\n").encode()
    path = folder / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in members.items():
            archive.writestr(member, data)
    return path


def _pip_install(python: Path, *wheels: Path) -> None:
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-index", "--no-deps",
                           *map(str, wheels)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, cxx: object) -> Path:
    """The venv's interpreter, with ``envpkg`` and ``envtwin`` installed."""
    root = tmp_path_factory.mktemp("environment")
    try:
        library = build.build_shared(LIBRARY, "libenv", ["-O1"])
    except build.BuildError as error:
        pytest.skip(f"cannot link with g++ here (apt-get install g++): {error}")
    made = subprocess.run([sys.executable, "-m", "venv", str(root / "venv")],
                          capture_output=True, text=True, timeout=600)
    if made.returncode != 0:
        pytest.skip("python -m venv is not installed here (apt-get install python3-venv): "
                    f"{made.stderr.strip()[-200:]}")
    python = root / "venv" / "bin" / "python"
    _pip_install(python, *(_wheel(name, library, root) for name in ("envpkg", "envtwin")))
    return python


def _site_packages(python: Path) -> Path:
    found = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path("
                            "'purelib'))"], capture_output=True, text=True, check=True)
    return Path(found.stdout.strip()).resolve()


def _clashes(document: dict[str, object]) -> dict[str, set[tuple[str, str]]]:
    """{symbol: {(package, library)}} of a ``check --format json`` document."""
    return {c["symbol"]: {(d["package"], d["library"]) for d in c["defined_by"]}
            for c in document["clashes"]}  # type: ignore[attr-defined]


def test_the_installed_libraries_are_found(venv: Path) -> None:
    result = invoke("check", "--environment", "--python", str(venv), "--format", "json")
    document = json.loads(result.stdout)
    site = _site_packages(venv)
    assert _clashes(document) == {SHARED: {("envpkg", str(site / "envpkg" / "libenvpkg.so")),
                                           ("envtwin", str(site / "envtwin" / "libenvtwin.so"))}}
    assert document["files"] == [] and document["errors"] == []  # installed: clash rule only
    assert result.exit_code == 1, result.stderr  # a clash fails the check


def test_a_wheel_clashes_with_the_installed_libraries(venv: Path, wheel: Path) -> None:
    alone = json.loads(invoke("check", "--format", "json", str(wheel)).stdout)
    assert alone["clashes"] == []  # the clash below comes from the environment
    result = invoke("check", "--environment", "--python", str(venv), "--format", "json",
                    str(wheel))
    assert result.exit_code == 1, result.stderr
    clash = _clashes(json.loads(result.stdout))[SHARED]
    assert {package for package, _ in clash} == {"uniqpkg", "envpkg", "envtwin"}
    member = next(library for package, library in clash if package == "uniqpkg")
    assert member.startswith("uniqpkg/_native") and member.endswith(".so")  # the wheel's member
    text = run_elfpatch("check", "--environment", "--python", str(venv), str(wheel))
    assert text.returncode == 1
    line = next(x for x in text.stdout.splitlines() if "clash:" in x and "calls()::count" in x)
    assert "(uniqpkg)" in line and "(envpkg)" in line and "(envtwin)" in line


def test_a_wheel_does_not_clash_with_its_installed_copy(venv: Path, wheel: Path,
                                                        tmp_path: Path) -> None:
    own = tmp_path / "own"
    made = subprocess.run([sys.executable, "-m", "venv", str(own)], capture_output=True,
                          text=True, timeout=600)
    assert made.returncode == 0, made.stderr
    _pip_install(own / "bin" / "python", wheel)
    result = invoke("check", "--environment", "--python", str(own / "bin" / "python"),
                    "--format", "json", str(wheel))
    assert json.loads(result.stdout)["clashes"] == [], result.stdout


def _script(path: Path, text: str, mode: int = 0o755) -> Path:
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.mark.parametrize(("body", "mode", "words"), [
    ("#!/bin/sh\nexit 0\n", 0o644, "is not executable"),
    ("echo no interpreter line\n", 0o755, "cannot run it: Exec format error"),
    ("#!/bin/sh\necho hello\n", 0o755, "is not a Python interpreter"),
    ("#!/bin/sh\necho '[1, 2]'\n", 0o755, "other than the list of distributions"),
    ("#!/bin/sh\necho 'no module named json' >&2; exit 3\n", 0o755,
     "exit 3: no module named json"),
])
def test_a_broken_python_is_one_line_and_exit_2(tmp_path: Path, body: str, mode: int,
                                                words: str) -> None:
    python = _script(tmp_path / "python", body, mode)
    result = run_elfpatch("check", "--environment", "--python", str(python))
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"elfpatch: error: {python}") and words in result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    in_process = invoke("check", "--environment", "--python", str(python))
    assert (in_process.exit_code, in_process.exception) == (2, None)


def test_python_needs_environment(venv: Path) -> None:
    result = invoke("check", "--python", str(venv), ".")
    assert result.exit_code == 2 and "--python names the interpreter" in result.stderr
