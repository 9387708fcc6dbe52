"""Entry point for `mitmdump -s` / `mitmweb -s`: `converse-tap addon-path` prints this file's path."""

from converse_tap.addon.tap import ConverseTap

addons = [ConverseTap()]
