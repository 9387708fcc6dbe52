"""An exchange row's columns, the agent key an exchange is counted under, and the row of an exchange whose
extraction failed (what the capture itself knows): read by `extract` and by the recording worker."""

from __future__ import annotations

import re
from typing import Any

from . import urls
from .exchange import HttpExchange
from .redact import NO_OPERATOR_PATTERNS, Redaction, cached_for_short
from .rows import Extraction, bound_keys
from .traceparent import trace_columns

_AGENT_ID = re.compile(r"^(?:[A-Za-z]{1,10}_[A-Za-z0-9_-]{6,}|[0-9a-fA-F]{8}-[0-9a-fA-F-]{27})$")
# the exchanges table's columns (store.schema.EXCHANGES, which this layer does not import; a test holds them equal)
EXCHANGE_COLUMNS = (
    "exchange_id",
    "ts_start",
    "ts_first_byte",
    "ts_end",
    "client_addr",
    "server_addr",
    "url",
    "http_method",
    "http_version",
    "agent",
    "agent_url",
    "agent_id",
    "binding",
    "dialect",
    "method",
    "method_raw",
    "jsonrpc_id",
    "a2a_version",
    "extensions_requested",
    "extensions_echoed",
    "converse_requested",
    "converse_echoed",
    "status_code",
    "content_type",
    "error_code",
    "error_status",
    "error_message",
    "error_reason",
    "streamed",
    "sse_events",
    "bytes_in",
    "bytes_out",
    "context_id",
    "task_id",
    "task_state",
    "complete",
    "error",
    "messages",
    "replies",
    "source",
    "anomalies",
    "trace_id",
    "span_id",
    "parent_span_id",
)
# an exchange row before its values are set: each row is a copy (the columns' defaults, in their order)
EXCHANGE_ROW: dict[str, Any] = dict.fromkeys(EXCHANGE_COLUMNS)
EXCHANGE_ROW.update(streamed=False, complete=False, messages=0, replies=0)


@cached_for_short(4096)
def agent_of(agent_url: str, redaction: Redaction = NO_OPERATOR_PATTERNS) -> tuple[str, str | None]:
    """(agent key, agent id): the id is the last path segment when it looks like one (e.g. `ag_…`).
    Taken from the redacted URL: no userinfo, no credential shape in the path."""
    _, netloc, path, _, _ = urls.split(redaction.url(agent_url))  # never raises (urlsplit can)
    segments = [s for s in path.split("/") if s]
    agent_id = segments[-1] if segments and _AGENT_ID.match(segments[-1]) else None
    return agent_id or f"{netloc}{path.rstrip('/')}", agent_id


def failed_extraction(
    ex: HttpExchange, error: BaseException, redaction: Redaction = NO_OPERATOR_PATTERNS
) -> Extraction:
    """The row of an exchange whose extraction failed: what the capture itself knows, and an anomaly that says
    why; the rest of the dataset is unaffected."""
    url = redaction.url(ex.url)
    agent, agent_id = agent_of(url)
    row: dict[str, Any] = dict.fromkeys(EXCHANGE_COLUMNS)
    row.update(
        exchange_id=ex.id,
        ts_start=ex.ts_start,
        ts_first_byte=ex.ts_first_byte,
        ts_end=ex.ts_end,
        client_addr=ex.client_addr,
        server_addr=ex.server_addr,
        url=url,
        http_method=ex.method.upper(),
        http_version=ex.http_version,
        agent=agent,
        agent_url=url,
        agent_id=agent_id,
        binding="unknown",
        dialect="unknown",
        method="unknown",
        converse_requested=False,
        converse_echoed=False,
        status_code=ex.status,
        streamed=ex.sse_events is not None,
        bytes_in=ex.bytes_in,
        bytes_out=ex.bytes_out,
        complete=ex.error is None and ex.status is not None,
        error=None if ex.error is None else redaction.log_text(ex.error),
        messages=0,
        replies=0,
        source=ex.source,
        anomalies=[*ex.anomalies, f"extraction_failed:{type(error).__name__}"],
        **trace_columns(ex.request_headers, ex.id),
    )
    out = Extraction(row)
    bound_keys(out)  # the agent under the key its other exchanges have
    return out
