"""python -m converse_tap: the converse-tap command line (also the file to hand spark-submit, hence absolute)."""

from converse_tap.cli import main

main()
