"""Into the observability stack: OTLP spans (otel.py, spans.py) and Prometheus metrics (metrics.py) of the
recorded exchanges, live from the recording worker (live.py) or backfilled from a dataset (backfill.py).
Imports a2a and store only; the SDKs come with the `otel` extra and are imported when an export is turned on."""
