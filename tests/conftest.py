"""Shared pytest fixtures: compilers, fixture builds, and command helpers."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from elfpatch.fixtures import build


def require_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed")
    return path


@pytest.fixture(scope="session")
def cxx() -> build.Toolchain:
    if not build.compiler_available():
        pytest.skip("no C++ compiler (g++) installed")
    return build.host_toolchain()


@pytest.fixture(scope="session")
def aarch64() -> build.Toolchain:
    toolchain = build.cross_toolchain("aarch64")
    if toolchain is None:
        pytest.skip("aarch64-linux-gnu-g++ is not installed")
    return toolchain


def run_elfpatch(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The installed command line, in a subprocess, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "elfpatch", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=600)
