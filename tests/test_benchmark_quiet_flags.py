"""``benchmarks/quiet_flags.py``: the flags ``inits`` reads as zero at load, read in a
process that has loaded the library (``fixtures/quiet_flag``).

``libwidgets_first.so``'s tracing switch is never set at load: it reads zero.
``libwidgets_first_hooked.so`` turns it on through a pointer to the function
that sets it, a call ``inits`` does not follow: it still takes the switch for
quiet, and the process shows it set.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.inits import scenario

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "quiet_flags.py"


def test_a_quiet_switch_reads_zero_and_one_set_through_a_pointer_does_not() -> None:
    built = scenario("quiet_flag")
    libraries = [built.path("libwidgets_first.so"), built.path("libwidgets_first_hooked.so")]
    result = subprocess.run([sys.executable, str(SCRIPT), "--json", *map(str, libraries)],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    quiet, hooked = json.loads(result.stdout)["libraries"]
    assert (quiet["ranges"], quiet["zero"], quiet["set"]) == (1, 1, [])
    assert hooked["ranges"] == 1 and hooked["zero"] == 0
    (switch,) = hooked["set"]
    assert switch["object"].endswith("tracing")
    assert int.from_bytes(bytes.fromhex(switch["bytes"]), "little") == 1
