"""Shared pytest fixtures: compilers, fixture builds, and command helpers."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
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
