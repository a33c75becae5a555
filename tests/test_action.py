"""The GitHub Action (``action.yml``): its shell steps run as the runner would run them,
with a fake ``GITHUB_*`` environment: elfpatch installed from this checkout, one check
giving annotations, a SARIF log and a Markdown step summary, and the verdict last."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml", reason="pip install -e '.[test]' installs PyYAML")

ROOT = Path(__file__).resolve().parent.parent
_EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


@dataclass
class Runner:
    """What the runner gives a composite action's steps."""

    workspace: Path
    temp: Path
    inputs: dict[str, str]
    outputs: dict[str, str]

    @property
    def output_file(self) -> Path:
        return self.temp / "github_output"

    @property
    def summary_file(self) -> Path:
        return self.temp / "step_summary.md"

    def evaluate(self, text: str) -> str:
        def value(match: re.Match[str]) -> str:
            expression = match.group(1)
            if expression.startswith("inputs."):
                return self.inputs[expression.removeprefix("inputs.")]
            if expression.startswith("steps.check.outputs."):
                return self.outputs.get(expression.removeprefix("steps.check.outputs."), "")
            raise AssertionError(f"the test runner does not know {expression!r}")
        return _EXPRESSION.sub(value, text)

    def run(self, step: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, **{k: self.evaluate(str(v)) for k, v in step.get("env", {}).items()},
               "GITHUB_ACTION_PATH": str(ROOT), "GITHUB_WORKSPACE": str(self.workspace),
               "RUNNER_TEMP": str(self.temp), "GITHUB_OUTPUT": str(self.output_file),
               "GITHUB_STEP_SUMMARY": str(self.summary_file), "GITHUB_ACTIONS": "true",
               "NO_COLOR": "1"}
        assert step["shell"] == "bash"
        # GitHub runs a bash step as `bash --noprofile --norc -eo pipefail {0}`.
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                               self.evaluate(step["run"])], cwd=self.workspace, env=env,
                              capture_output=True, text=True, timeout=900)
        if self.output_file.exists():
            for line in self.output_file.read_text().splitlines():
                name, _, value = line.partition("=")
                self.outputs[name] = value
        return done


def action() -> dict[str, Any]:
    return dict(yaml.safe_load((ROOT / "action.yml").read_text()))


def run_action(workspace: Path, temp: Path, installed: bool = False,
               **given: str) -> tuple[Runner, dict[str, Any]]:
    """Every step in order, as the runner would (a ``uses`` step is only looked at);
    ``installed``: the install step already ran in this ``temp``."""
    described = action()
    inputs = {name: str(spec.get("default", "")) for name, spec in described["inputs"].items()}
    runner = Runner(workspace, temp, {**inputs, **given}, {})
    results: dict[str, Any] = {}
    for step in described["runs"]["steps"]:
        if "uses" in step or (installed and step["name"] == "Install elfpatch"):
            results[step["name"]] = step
            continue
        done = runner.run(step)
        results[step["name"]] = done
        if step["name"] == "Verdict":
            break
        assert done.returncode == 0, (step["name"], done.stdout, done.stderr)
    return runner, results


@pytest.fixture(scope="module")
def python_for_action() -> str:
    """The interpreter the action installs elfpatch with: this one."""
    if not shutil.which("bash"):
        pytest.skip("bash is not installed")
    return sys.executable


def test_the_action_is_a_composite_of_known_steps() -> None:
    described = action()
    assert described["runs"]["using"] == "composite"
    assert [s["name"] for s in described["runs"]["steps"]] == [
        "Install elfpatch", "Check", "Summary", "Upload SARIF", "Verdict"]
    upload = described["runs"]["steps"][3]
    assert upload["uses"].startswith("github/codeql-action/upload-sarif@")
    assert upload["with"]["sarif_file"] == "${{ inputs.sarif-file }}"
    assert "inputs.upload-sarif == 'true'" in upload["if"]
    assert "pip install elfpatch" not in (ROOT / "action.yml").read_text()


@pytest.mark.slow
def test_a_failing_and_a_passing_run(python_for_action: str, wheel: Path,
                                     tmp_path: Path) -> None:
    workspace, temp = tmp_path / "workspace", tmp_path / "temp"
    (workspace / "dist").mkdir(parents=True)
    temp.mkdir()
    shutil.copy(wheel, workspace / "dist")
    (workspace / "pyproject.toml").write_text("[tool.elfpatch]\n")  # the defaults

    runner, steps = run_action(workspace, temp, python=python_for_action,
                               **{"upload-sarif": "true"})
    assert runner.outputs["exit-code"] == "1"
    assert steps["Verdict"].returncode == 1
    annotations = [line for line in steps["Check"].stdout.splitlines()
                   if line.startswith("::error ")]
    assert annotations and "elfpatch unique" in annotations[0]
    summary = runner.summary_file.read_text()
    assert summary.startswith("## elfpatch check: FAILED") and "uniqpkg/" in summary
    sarif = json.loads((workspace / runner.outputs["sarif-file"]).read_text())
    assert sarif["version"] == "2.1.0" and sarif["runs"][0]["results"]

    # The same workspace with a policy that accepts what is there: the step passes.
    (workspace / "pyproject.toml").write_text('[tool.elfpatch]\nallow = [".*"]\n')
    runner.summary_file.unlink()
    runner, steps = run_action(workspace, temp, installed=True)
    assert runner.outputs["exit-code"] == "0" and steps["Verdict"].returncode == 0
    assert runner.summary_file.read_text().startswith("## elfpatch check: passed")

    # A path that matches nothing: exit 2 and one line, and the summary says so.
    runner.summary_file.unlink()
    runner, steps = run_action(workspace, temp, installed=True, paths="missing/*.whl")
    assert runner.outputs["exit-code"] == "2" and steps["Verdict"].returncode == 2
    assert "elfpatch: error:" in steps["Check"].stderr
