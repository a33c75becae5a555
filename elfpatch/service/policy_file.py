"""The ``check`` policy read from a file: ``--config FILE``, or the nearest
pyproject.toml's ``[tool.elfpatch]``; and the JSON schema of that table.

The rules themselves (``Policy``, built from a table) do no I/O; this module
finds and reads the file they come from.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from elfpatch.analysis.policy import Policy, policy_from_table
from elfpatch.base.regular_file import read_regular_text
from elfpatch.errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


def tool_schema(tool: str = "elfpatch") -> dict[str, Any]:
    """The JSON schema of ``[tool.$tool]`` (a validate-pyproject ``tool_schema`` plugin:
    ``validate-pyproject pyproject.toml`` checks the table with it)."""
    import json
    from importlib import resources

    schema: dict[str, Any] = json.loads(
        resources.files("elfpatch.analysis").joinpath("policy.schema.json").read_text("utf-8"))
    return schema


def read_policy_file(path: Path) -> Policy:
    try:
        # A FIFO or device given as --config is refused, not waited on.
        document = tomllib.loads(read_regular_text(path))
    except FileNotFoundError:
        raise InputError(str(path), "no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(str(path), f"cannot read: {error}") from None
    except tomllib.TOMLDecodeError as error:
        raise InputError(str(path), f"not valid TOML: {error}") from None
    tool = document.get("tool", {})
    if not isinstance(tool, dict):
        raise InputError(str(path), "[tool] must be a table")
    table = tool.get("elfpatch", document if path.name != "pyproject.toml" else {})
    return policy_from_table(table, str(path))


def find_pyproject(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_policy(config: str | None, start: Path | None = None) -> Policy:
    """--config FILE, else the nearest pyproject.toml's [tool.elfpatch], else the defaults."""
    if config is not None:
        return read_policy_file(Path(config))
    pyproject = find_pyproject((start or Path.cwd()).resolve())
    return read_policy_file(pyproject) if pyproject else Policy()
