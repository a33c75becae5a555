"""Every command the README shows runs as written, after the README's first command.

Commands are the lines of ``sh`` blocks and the ``$ `` lines of plain
blocks, run in order in one empty folder with the installed ``elfpatch`` and
``python`` first on PATH (what the first command leaves you with).  Output
shown under a ``$`` line must appear in what the command prints (``…`` and
``...`` stand for what was left out; addresses may differ between compilers).
A command expected to fail says so in a trailing ``# exits N``.  The first
block (the install and test commands themselves), the Python example (run
by test_api) and configuration snippets for other tools (TOML, YAML, JSON)
are not run here.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
_EXITS = re.compile(r"#\s*exits (\d+)\s*$")
_ADDRESS = re.compile(r"0x[0-9a-f]+")
_ELIDED = ("...", "…")


@dataclass(frozen=True)
class Shown:
    command: str
    output: tuple[str, ...]  # the lines the README shows under it
    exit_code: int


def shown_commands(text: str) -> list[Shown]:
    commands: list[Shown] = []
    for number, block in enumerate(_BLOCK.finditer(text)):
        language, body = block.group(1), block.group(2)
        if number == 0 or language not in ("", "sh", "console"):
            continue
        commands += _sh_lines(body) if language == "sh" else _dollar_lines(body)
    return commands


def _exit_code(command: str) -> int:
    found = _EXITS.search(command)
    return int(found.group(1)) if found else 0


def _sh_lines(body: str) -> list[Shown]:
    return [Shown(line, (), _exit_code(line)) for line in body.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def _dollar_lines(body: str) -> list[Shown]:
    commands: list[Shown] = []
    command, output = None, []
    for line in body.splitlines():
        if line.startswith("$ "):
            if command is not None:
                commands.append(Shown(command, tuple(output), _exit_code(command)))
            command, output = line[2:], []
        elif command is not None:
            output.append(line)
    if command is not None:
        commands.append(Shown(command, tuple(output), _exit_code(command)))
    return commands


def _normal(line: str) -> str:
    return " ".join(_ADDRESS.sub("0x?", line).split())


def missing_lines(shown: tuple[str, ...], printed: str) -> list[str]:
    """Lines the README shows that the command did not print."""
    actual = [_normal(line) for line in printed.splitlines()]
    missing = []
    for line in shown:
        wanted = _normal(line)
        if not wanted or wanted in _ELIDED:
            continue
        prefix = wanted.rstrip("…. ;").rstrip()  # "text …" shows the start of a line
        if not any(prefix in got for got in actual):
            missing.append(line)
    return missing


def test_the_readme_shows_commands() -> None:
    commands = shown_commands((ROOT / "README.md").read_text())
    assert len(commands) >= 5
    assert any(c.command.startswith("elfpatch inits") for c in commands)


def test_every_readme_command_runs_as_written(tmp_path: Path) -> None:
    if not Path(sys.executable).with_name("elfpatch").exists():
        pytest.skip("elfpatch is not installed beside this interpreter (pip install -e .)")
    environment = {**os.environ,
                   "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
                   "NO_COLOR": "1"}
    for shown in shown_commands((ROOT / "README.md").read_text()):
        run = subprocess.run(["bash", "-c", shown.command], cwd=tmp_path, env=environment,
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == shown.exit_code, (shown.command, run.stderr[-2000:])
        assert missing_lines(shown.output, run.stdout) == [], (shown.command, run.stdout)
