"""What a loop laid out before its condition knows on entry (``FunctionWalk.orphan_state``).

gcc lays a loop out body first: a jump down to its condition, the body, the
condition branching back.  The body is entered only from below; a register
the loop never writes holds there what the branches into the loop agree on.
A branch from above to a place past the loop's end never enters it: what it
knew (before the register was set) must not be merged in.  It was, and a
registration that keeps the registry's address in a callee-saved register
across its search loop lost it, and with it the insertion after the loop
(gflags' flag registry under -flto).  Hand-written assembly holds the layout
still.
"""

from __future__ import annotations

from pathlib import Path

from support.build import require_tool
from support.inits import assembled_events, local_objects
from support.readelf import symtab_address

from elfpatch.analysis.effects.summary import READ, UPDATE_STORE, WRITE

# ``counter`` is bumped through r13 after a loop laid out body first; a branch from
# above, taken before r13 is set, goes past the loop.
LOOP = """
    .text
    .globl bump_after_loop
    .type bump_after_loop, @function
bump_after_loop:
    push %rbx
    push %r13
    test %edi, %edi
    jne .Lpast
    lea counter(%rip), %r13
    xor %ebx, %ebx
    jmp .Lcondition
.Lbody:
    add $1, %ebx
.Lcondition:
    cmp $10, %ebx
    jl .Lbody
    addl $1, (%r13)
.Lpast:
    pop %r13
    pop %rbx
    ret
    .size bump_after_loop, .-bump_after_loop
""" + local_objects(counter=4)


def test_a_register_the_loop_leaves_alone_is_known_after_it(tmp_path: Path) -> None:
    require_tool("gcc")
    library = tmp_path / "libloop.so"
    events = assembled_events("gcc", LOOP, library, "bump_after_loop")
    counter = f"{symtab_address(library, 'counter'):#x}"  # a local object: by its address
    assert (READ, counter, None, 0) in events, events
    assert (WRITE, counter, None, UPDATE_STORE) in events, events
