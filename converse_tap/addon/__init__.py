"""mitmproxy glue: the ConverseTap addon, its stream tap, and flow conversion."""
