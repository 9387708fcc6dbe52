"""python -m converse_tap: the converse-tap command line."""

from .cli import main

main()
