"""What `pip install elfpatch` brings: only dependencies the package uses, and its licence."""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent

# Distribution name -> the module it provides.
IMPORT_NAMES = {"pyelftools": "elftools", "click": "click", "capstone": "capstone",
                "isal": "isal", "tomli": "tomli"}


def runtime_dependencies() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [re.split(r"[<>=;! \[]", spec, maxsplit=1)[0] for spec in project["dependencies"]]


def package_source() -> str:
    return "\n".join(path.read_text() for path in (ROOT / "elfpatch").rglob("*.py"))


def test_every_runtime_dependency_is_imported_by_the_package() -> None:
    source = package_source()
    for distribution in runtime_dependencies():
        module = IMPORT_NAMES.get(distribution)
        assert module is not None, f"{distribution}: say which module it provides"
        pattern = rf"^\s*(import {module}\b|from {module}[. ])"
        assert re.search(pattern, source, re.MULTILINE), f"{distribution} is never imported"


def test_the_test_oracle_is_not_a_runtime_dependency() -> None:
    assert "lief" not in runtime_dependencies()
    assert not re.search(r"^\s*(import|from) lief\b", package_source(), re.MULTILINE)


def test_the_licence_is_declared_and_shipped() -> None:
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT"
    try:
        installed = metadata.metadata("elfpatch")
    except metadata.PackageNotFoundError:
        pytest.skip("elfpatch is not installed (pip install -e .)")
    assert installed.get("License-Expression") == "MIT"
