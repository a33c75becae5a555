"""The real loader's answer for one library: the probe of ``benchmarks/unload_probe.py``.

The tests and the benchmark share one probe, so what the suite checks is
what the measurement on real wheels runs.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "unload_probe.py"
_spec = importlib.util.spec_from_file_location("unload_probe", _SCRIPT)
assert _spec is not None and _spec.loader is not None
unload_probe = importlib.util.module_from_spec(_spec)
sys.modules["unload_probe"] = unload_probe
_spec.loader.exec_module(unload_probe)

Probe = unload_probe.Probe
build_host = unload_probe.build_host
probe = unload_probe.probe
