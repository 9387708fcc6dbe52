#!/usr/bin/env bash
# Print the path of a Python >= 3.12 interpreter, or explain what to install and exit 1.
set -u
candidates=()
[ -n "${PYTHON:-}" ] && candidates+=("$PYTHON")
candidates+=(python3.12 python3.13 python3.14)
if command -v pyenv >/dev/null 2>&1; then
  root=$(pyenv root 2>/dev/null)
  for v in $(ls "$root/versions" 2>/dev/null); do candidates+=("$root/versions/$v/bin/python"); done
fi
for v in $(ls "$HOME/.pyenv/versions" 2>/dev/null); do candidates+=("$HOME/.pyenv/versions/$v/bin/python"); done
candidates+=(/usr/local/bin/python3 /usr/bin/python3 python3 python)
for c in "${candidates[@]}"; do
  p=$(command -v "$c" 2>/dev/null) || continue
  # pyenv shims answer for versions that are not installed; ask the interpreter itself.
  if "$p" -c 'import sys, venv; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; then
    "$p" -c 'import sys; print(sys.executable)'
    exit 0
  fi
done
cat >&2 <<'MSG'
error: a2a-converse-tap needs Python 3.12 or newer (mitmproxy 12 requires it), and none was found.
Tried $PYTHON, python3.12/3.13/3.14, pyenv versions and python3 on PATH.
Install one, for example:  pyenv install 3.12   or   apt-get install python3.12 python3.12-venv
then run the command again (or point PYTHON=/path/to/python3.12 at it).
MSG
exit 1
