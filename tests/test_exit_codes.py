"""Exit codes through the installed console script: 0 pass, 1 findings, 2 bad input or
usage, 3 elfpatch's own bug; defined once (``ExitCode``) and listed in --help and README."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.fixlib import VARIANTS, built_library

from elfpatch.errors import EXIT_CODES_HELP, ExitCode

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(sys.executable).with_name("elfpatch")


@pytest.fixture(scope="module")
def library() -> Path:
    return built_library(VARIANTS["default"])


def console(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    if not SCRIPT.exists():
        pytest.skip("the elfpatch console script is not installed beside this interpreter")
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env={**os.environ, "NO_COLOR": "1"})


def test_the_codes_are_distinct() -> None:
    codes = [code.value for code in ExitCode]
    assert len(set(codes)) == len(codes)
    assert (ExitCode.OK, ExitCode.FINDINGS, ExitCode.BAD_INPUT, ExitCode.INTERNAL) == (0, 1, 2, 3)


def test_check_passes_with_0(library: Path, tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[tool.elfpatch]\nunique = "warn"\n')
    run = console("check", "--config", str(policy), str(library))
    assert run.returncode == ExitCode.OK, run.stderr


def test_check_findings_are_1(library: Path) -> None:
    run = console("check", "--config", os.devnull, str(library))
    assert run.returncode == ExitCode.FINDINGS, run.stderr
    assert "check FAILED" in run.stdout


@pytest.mark.parametrize("args", [("check", "--config", os.devnull, "/no/such/lib.so"),
                                  ("check", "--no-such-option", "x"),
                                  ("scan",)])
def test_bad_input_and_usage_are_2(args: tuple[str, ...]) -> None:
    run = console(*args)
    assert run.returncode == ExitCode.BAD_INPUT, run.stderr
    assert "Traceback" not in run.stderr


def test_a_bug_of_elfpatch_is_3_in_one_line(library: Path, tmp_path: Path) -> None:
    """An unexpected exception inside a command (a bug planted here) is not exit 2."""
    planted = ("import sys, elfpatch.api\n"
               "def broken(*args, **kwargs): raise ZeroDivisionError('planted bug')\n"
               "elfpatch.api.check = broken\n"
               "from elfpatch.console import main\n"
               "sys.argv = ['elfpatch'] + sys.argv[1:]\n"
               "main()\n")
    for command in (["scan", str(library)], ["check", "--config", os.devnull, str(library)]):
        if command[0] == "scan":
            script = planted.replace("api.check", "api.scan")
        else:
            script = planted.replace("elfpatch.api.check = broken\n",
                                     "import elfpatch.service.check as s\n"
                                     "s.run_check = broken\n")
        run = subprocess.run([sys.executable, "-c", script, *command], capture_output=True,
                             text=True, timeout=300, cwd=tmp_path)
        assert run.returncode == ExitCode.INTERNAL, (command, run.stderr)
        lines = run.stderr.splitlines()
        assert len(lines) == 1 and "internal error" in lines[0], run.stderr
        assert "planted bug" in lines[0]


def test_help_and_readme_list_every_code() -> None:
    run = console("--help")
    helped = " ".join(run.stdout.split())
    readme = (ROOT / "README.md").read_text()
    for code in ExitCode:
        assert f" {code.value} " in f" {' '.join(EXIT_CODES_HELP.split())} "
        assert f"{code.value} " in helped.split("Exit codes:", 1)[1], code
        assert f"\n| {code.value} |" in readme, code
