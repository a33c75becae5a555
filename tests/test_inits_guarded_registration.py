"""A registration made from a function-local static's construction
(``fixtures/guarded_registration``).

``plugin.cpp`` fills ``registry.cpp``'s ``registry`` once, from under a
function-local static's guard.  The oracle is the registry's size: 1 where
the plugin's initializer ran first (the registration lost), 2 otherwise.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.inits import (
    MACHINES,
    ORDER_KINDS,
    order_risks_when_stripped,
    printed,
    risks,
    same_when_stripped,
    scenario,
)


@pytest.mark.parametrize("machine", MACHINES)
def test_the_lost_registration_is_an_error(machine: str, tmp_path: Path) -> None:
    built = scenario("guarded_registration", machine)
    assert printed(built, "plugin_first") == {"ready": "1", "size": "1"}
    for path in (built.path("plugin_first"), built.path("libplugin_first.so")):
        found = order_risks_when_stripped(machine, path, tmp_path)
        assert [(r["severity"], r["kind"]) for r in found] == [("error", "init-order")]
        assert "plugin.cpp writes into registry (a registration)" in found[0]["message"]


@pytest.mark.parametrize("machine", MACHINES)
def test_the_right_order_is_a_link_order_dependence(machine: str, tmp_path: Path) -> None:
    """Stripped too: ``plugin_ready``, just past the registry, is an object of its own
    (before, it was taken for the registry's member, and the warning was missing)."""
    built = scenario("guarded_registration", machine)
    assert printed(built, "registry_first") == {"ready": "1", "size": "2"}
    found = risks(same_when_stripped(machine, built.path("registry_first"), tmp_path),
                  *ORDER_KINDS)
    assert [(r["severity"], r["kind"]) for r in found] == [("warning", "link-order-dependence")]
