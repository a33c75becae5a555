"""Allow `python -m elfpatch`."""

from elfpatch.console import main

main()
