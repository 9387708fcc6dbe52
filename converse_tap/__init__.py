"""Record A2A agent traffic through mitmproxy and analyse the Radioso converse extension envelope."""

__version__ = "0.1.0"
