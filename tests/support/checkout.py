"""The suite run from a plain checkout, without ``pip install``.

An install maps the top-level ``fixtures/`` folder to ``elfpatch.fixtures``
(pyproject's ``package-dir``); a checkout has no such package.  When it is
missing, ``fixtures/`` is registered under that name in this process, and the
checkout goes first on the ``PYTHONPATH`` of the processes the tests start, so
``python -m elfpatch`` runs this checkout from any working folder.  Those
processes still lack ``elfpatch.fixtures``: the few tests that need it there
(``elfpatch demo``) skip unless elfpatch is installed.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURES = ROOT / "fixtures"
INSTALL_HINT = "pip install -e ."


def _fixtures_installed() -> bool:
    try:
        return importlib.util.find_spec("elfpatch.fixtures") is not None
    except ModuleNotFoundError:  # elfpatch itself is not importable
        return False


def _register_fixtures() -> None:
    """Import ``fixtures/`` as ``elfpatch.fixtures``, its submodules found in that folder."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    spec = importlib.util.spec_from_file_location(
        "elfpatch.fixtures", FIXTURES / "__init__.py", submodule_search_locations=[str(FIXTURES)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)


def _checkout_first_on_pythonpath() -> None:
    inherited = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = f"{ROOT}{os.pathsep}{inherited}" if inherited else str(ROOT)


INSTALLED = _fixtures_installed()
if not INSTALLED:
    _register_fixtures()
    _checkout_first_on_pythonpath()


def require_installed(what: str) -> None:
    """Skip unless elfpatch (with its fixtures) is installed, for ``what`` needs it elsewhere."""
    if not INSTALLED:
        import pytest

        pytest.skip(f"{what} needs elfpatch installed ({INSTALL_HINT})")
