"""What a path means and what a path that cannot be used says: one line naming it and why."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from support.build import invoke
from support.fixlib import VARIANTS, built_library


@pytest.fixture(scope="module")
def library() -> Path:
    return built_library(VARIANTS["default"])


def test_a_broken_wheel_in_a_folder_does_not_hide_the_rest(library: Path,
                                                           tmp_path: Path) -> None:
    shutil.copy(library, tmp_path / "libgood.so")
    (tmp_path / "broken-1.0-py3-none-any.whl").write_bytes(b"PK\x03\x04 not really a zip")
    result = invoke("scan", "--json", str(tmp_path))
    assert result.exit_code == 2
    assert "libgood.so" in result.stdout
    assert "broken-1.0-py3-none-any.whl" in result.stderr
    assert "internal error" not in result.stderr


def test_a_static_library_is_named_as_such(tmp_path: Path, cxx: object) -> None:
    ar = shutil.which("ar")
    if ar is None:
        pytest.skip("ar is not installed (apt-get install binutils)")
    source = tmp_path / "a.cpp"
    source.write_text("inline int& v() { static int x; return x; }\nint use() { return v(); }\n")
    subprocess.run(["g++", "-c", "-fPIC", "-o", str(tmp_path / "a.o"), str(source)], check=True)
    subprocess.run([ar, "rcs", str(tmp_path / "liba.a"), str(tmp_path / "a.o")], check=True)
    result = invoke("scan", str(tmp_path / "liba.a"))
    assert result.exit_code == 2
    assert "static library (ar archive)" in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_an_unreadable_folder_says_so(library: Path, tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("running as root: file permissions do not stop reads")
    locked = tmp_path / "locked"
    locked.mkdir()
    shutil.copy(library, locked / "liba.so")
    locked.chmod(0)
    try:
        result = invoke("scan", str(locked))
    finally:
        locked.chmod(0o755)
    assert result.exit_code == 2
    assert "cannot read folder" in result.stderr and "holds no ELF" not in result.stderr


def test_the_closure_of_a_wheel_is_explained(tmp_path: Path) -> None:
    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK")
    result = invoke("inits", "--closure", str(wheel))
    assert result.exit_code == 2
    assert "not a wheel" in result.stderr and "not an ELF file" not in result.stderr
