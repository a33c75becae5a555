"""``check --output FORMAT=FILE``: several reports from one analysis, the text still on
the terminal."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
from support.build import invoke
from support.fixlib import VARIANTS, built_library

import elfpatch.service.check

SCRIPT = Path(sys.executable).with_name("elfpatch")


@pytest.fixture(scope="module")
def library() -> Path:
    return built_library(VARIANTS["default"])


def test_every_format_from_one_analysis(library: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    analyse = elfpatch.service.check.run_check

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return analyse(*args, **kwargs)

    monkeypatch.setattr(elfpatch.service.check, "run_check", counted)
    files = {name: tmp_path / f"report.{name}" for name in ("json", "sarif", "junit", "github")}
    result = invoke("check", "--config", os.devnull, str(library),
                    *(f"--output={name}={path}" for name, path in files.items()))
    assert result.exception is None, result.exception
    assert result.exit_code == 1 and "check FAILED" in result.stdout  # the text, as always
    assert len(calls) == 1
    document = json.loads(files["json"].read_text())
    assert document["passed"] is False and document["violations"]
    assert json.loads(files["sarif"].read_text())["version"] == "2.1.0"
    assert ElementTree.parse(files["junit"]).getroot().tag == "testsuites"
    assert files["github"].read_text().startswith("::error ")


def test_a_file_matches_the_same_format_on_stdout(library: Path, tmp_path: Path) -> None:
    if not SCRIPT.exists():
        pytest.skip("the elfpatch console script is not installed beside this interpreter")
    report = tmp_path / "check.json"
    environment = {**os.environ, "NO_COLOR": "1"}
    both = subprocess.run([str(SCRIPT), "check", "--config", os.devnull, "--output",
                           f"json={report}", "--output", f"text={tmp_path / 'check.txt'}",
                           str(library)], capture_output=True, text=True, env=environment)
    alone = subprocess.run([str(SCRIPT), "check", "--config", os.devnull, "--format", "json",
                            str(library)], capture_output=True, text=True, env=environment)
    assert both.returncode == alone.returncode == 1
    assert report.read_text() == alone.stdout
    assert (tmp_path / "check.txt").read_text() == both.stdout


@pytest.mark.parametrize("value", ["sarif", "pdf=x.pdf", "json=", "=x.json"])
def test_a_wrong_output_is_a_usage_error(value: str, library: Path) -> None:
    result = invoke("check", "--config", os.devnull, "--output", value, str(library))
    assert result.exit_code == 2 and "--output" in result.stderr


def test_an_unwritable_output_is_one_line(library: Path, tmp_path: Path) -> None:
    target = tmp_path / "no" / "such" / "folder" / "x.json"
    result = invoke("check", "--config", os.devnull, "--output", f"json={target}",
                    str(library))
    assert result.exit_code == 2 and result.exception is None
    assert result.stderr.count("\n") == 1 and "cannot write the report" in result.stderr


def test_the_markdown_summary_keeps_its_table_whole(library: Path) -> None:
    """C++ names hold pipes and angle brackets: every row still has its six cells."""
    from dataclasses import replace

    from elfpatch.analysis.policy import Policy
    from elfpatch.report.check_markdown import render_markdown
    from elfpatch.service.check import run_check

    result = run_check([str(library)], Policy(), set())
    odd = replace(result.libraries[0].facts,
                  source=replace(result.libraries[0].facts.source, path="lib|a`b<c>.so"))
    result = replace(result, libraries=(replace(result.libraries[0], facts=odd),))
    text = render_markdown(result)
    assert text.startswith("## elfpatch check: FAILED")
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(rows) == 2  # the head and the library
    for row in rows:
        cells = [cell for cell in re.split(r"(?<!\\)\|", row)[1:-1]]
        assert len(cells) == 6, row
    assert "lib\\|a'b<c>.so" in rows[1]
