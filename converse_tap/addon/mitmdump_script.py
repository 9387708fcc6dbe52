"""Entry point for `mitmdump -s` / `mitmweb -s`: `converse-tap addon-path` prints this file's path.

Loads the recorder and the "A2A converse" content view (for streamed bodies in mitmweb and the console, run
with --set store_streamed_bodies=true).
"""

from mitmproxy import contentviews

from converse_tap.a2a.redact import install_log_redactor
from converse_tap.addon.contentview import A2AContentview
from converse_tap.addon.tap import ConverseTap

contentviews.add(A2AContentview())
# the log handlers mitmdump/mitmweb installed before loading this script: URLs in every line lose credentials
install_log_redactor()
addons = [ConverseTap()]
