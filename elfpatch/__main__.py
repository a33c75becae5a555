"""Allow `python -m elfpatch`."""

from elfpatch.cli import main

main()
