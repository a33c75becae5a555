"""Allow `python -m elfpatch`."""

import sys

try:
    from elfpatch.console import main
except KeyboardInterrupt:
    # Ctrl-C while the module that answers it loads: nothing has run yet.
    sys.stderr.write("elfpatch: interrupted\n")
    raise SystemExit(130) from None

main()
