"""Which reads come before any code that is not followed (``Effects.leading_reads``),
composed from function summaries made by hand: a look-up counts there whatever the
code not followed does later (``registries.early_lookups``)."""

from __future__ import annotations

from elfpatch.analysis.effects.summary import (
    CALL,
    GUARD,
    READ,
    UNSEEN,
    Collector,
    Effects,
    Event,
    FunctionKey,
    FunctionSummary,
    StopReason,
)

ROOT, CALLEE, LEFT_OUT = 0x1000, 0x2000, 0x3000


def composed(*events: Event, callee: tuple[Event, ...] = ()) -> Effects:
    summaries: dict[FunctionKey, FunctionSummary] = {
        ROOT: FunctionSummary(events=list(events)),
        CALLEE: FunctionSummary(events=list(callee), may_return=True)}
    collector = Collector(summaries, lambda _callee, _position: 0)
    collector.function(ROOT)
    return collector.effects(True, ())


def test_reads_before_code_not_followed_lead() -> None:
    effects = composed((READ, "registry", None, 0),
                       (UNSEEN, StopReason.INDIRECT_CALL, None, 0),
                       (READ, "later", None, 0))
    assert effects.open_reads == ("registry", "later")
    assert effects.leading_reads == ("registry",)


def test_a_call_the_budget_left_out_is_code_not_followed() -> None:
    effects = composed((READ, "registry", None, 0), (CALL, LEFT_OUT, None, 0),
                       (READ, "later", None, 0))
    assert effects.leading_reads == ("registry",)


def test_a_callee_followed_is_seen_in_program_order() -> None:
    effects = composed((CALL, CALLEE, None, 0), (READ, "after", None, 0),
                       callee=((READ, "inside", None, 0),
                               (UNSEEN, StopReason.INDIRECT_JUMP, None, 0)))
    assert effects.open_reads == ("inside", "after")
    assert effects.leading_reads == ("inside",)


def test_a_read_under_a_guard_is_no_look_up() -> None:
    effects = composed((GUARD, True, "guard", 0), (READ, "static", None, 0),
                       (GUARD, False, "guard", 0), (READ, "open", None, 0))
    assert effects.leading_reads == ("open",)
