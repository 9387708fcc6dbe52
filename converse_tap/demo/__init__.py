"""The demo: a converse-extension agent on the official a2a-sdk, a traffic driver, and the pipeline around them."""
