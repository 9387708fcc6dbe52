"""HAR entries as exporters really write them: a field the format requires missing, null or of another type costs
that field (noted on the exchange), never the exchange, and never its neighbours."""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from converse_tap import harentry
from converse_tap.a2a.redact import TextPolicy
from converse_tap.harfit import fitted
from converse_tap.ingest import ingest
from converse_tap.store.reader import load
from tests.test_ingest import _entry, _har


def _set(path: str, value: Any) -> Callable[[dict], None]:
    *parents, last = path.split(".")

    def change(entry: dict) -> None:
        holder = entry
        for p in parents:
            holder = holder[p]
        holder[last] = value

    return change


def _headers(side: str, *fields: Any) -> Callable[[dict], None]:
    return lambda entry: entry[side]["headers"].extend(fields)


# what an exporter wrote -> the anomaly noted; whether the reply's envelope is still read
CASES = {
    "started null": (_set("startedDateTime", None), "har_started_unreadable", True),
    "started not ISO 8601": (_set("startedDateTime", "Tue, 01 Dec 2026 10:00:00 GMT"), "har_started_unreadable", True),
    "response null": (_set("response", None), "har_response_missing", False),
    "response headers null": (_set("response.headers", None), "har_response_headers_unreadable", True),
    "request headers a string": (_set("request.headers", "x: y"), "har_request_headers_unreadable", True),
    "a header without a name": (
        _headers("response", {"name": None, "value": "x"}), "har_response_header_unreadable:1", True,
    ),
    "a header of one item": (_headers("request", ["Only"], {"value": "x"}), "har_request_header_unreadable:2", True),
    "status not a number": (_set("response.status", "OK"), "har_response_status_unreadable:OK", True),
    "content null": (_set("response.content", None), "har_response_content_unreadable", False),
    "text a number": (_set("response.content.text", 12), "har_response_content_unreadable", False),
    "text said to be base64": (_set("response.content.encoding", "base64"), "har_response_not_base64", True),
    "charset a codec's name": (
        _set("response.headers", [{"name": "Content-Type", "value": "application/json; charset=zip"}]),
        "har_response_charset_unusable:zip", True,
    ),
    "request charset unknown": (
        _set("request.headers", [["Content-Type", "application/json; charset=rot13"]]),
        "har_request_charset_unusable:rot13", True,
    ),
    "encoding a codec's name": (_set("response.content.encoding", "zip"), "har_response_encoding_ignored:zip", True),
    "text null, marked base64": (
        _set("response.content", {"text": None, "encoding": "base64"}), "empty_body", False,
    ),
    "postData a list": (_set("request.postData", []), "har_request_body_unreadable", None),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_an_odd_field_costs_that_field_not_the_exchange(tmp_path: Path, case: str) -> None:
    change, anomaly, envelope = CASES[case]
    odd = _entry("odd")
    change(odd)
    _har(tmp_path / "x.har", [odd, _entry("neighbour")])
    result = ingest([tmp_path / "x.har"], tmp_path / "out", TextPolicy())
    assert result.errors == [], result.errors
    exchanges = load(tmp_path / "out", "exchanges")
    notes = {a for row in exchanges["anomalies"] for a in row}
    if envelope is None:  # the request's body was the A2A call: without it there is no A2A exchange to keep
        assert result.exchanges == 1 and not any(n.startswith("har_") for n in notes)
        return
    assert result.exchanges == 2 and anomaly in notes, notes
    msgs = load(tmp_path / "out", "messages")
    assert sorted(msgs[msgs["role"] == "user"]["text"]) == ["neighbour", "odd"]
    assert len(msgs[(msgs["role"] == "agent") & msgs["has_envelope"]]) == 1 + envelope


def test_an_entry_without_a_time_has_none_and_is_still_recognised_when_ingested_again(tmp_path: Path) -> None:
    odd = _entry("odd")
    odd["startedDateTime"] = None
    _har(tmp_path / "x.har", [odd])
    assert ingest([tmp_path / "x.har"], tmp_path / "out", TextPolicy()).exchanges == 1
    row = load(tmp_path / "out", "exchanges").iloc[0]
    assert row[["ts_start", "ts_first_byte", "ts_end"]].isna().all()  # none made up
    assert ingest([tmp_path / "x.har"], tmp_path / "out", TextPolicy()).exchanges == 0
    assert len(load(tmp_path / "out", "exchanges")) == 1


def test_an_entry_without_a_request_method_is_named_and_costs_only_itself(tmp_path: Path) -> None:
    odd = _entry("odd")
    odd["request"] = None
    _har(tmp_path / "x.har", [odd, _entry("neighbour")])
    result = ingest([tmp_path / "x.har"], tmp_path / "out", TextPolicy())
    assert result.exchanges == 1
    assert [(e.position, e.reason) for e in result.errors] == [
        ("log.entries[0]", "malformed entry (ValueError: request.method missing)")
    ]


def test_chromes_reason_for_a_request_without_response_is_the_exchanges_error(tmp_path: Path) -> None:
    failed = _entry("failed")
    failed["response"] = {"status": 0, "httpVersion": "", "headers": [], "content": {}, "_error": "net::ERR_FAILED"}
    _har(tmp_path / "x.har", [failed, _entry("fine")])
    ingest([tmp_path / "x.har"], tmp_path / "out", TextPolicy())
    exchanges = load(tmp_path / "out", "exchanges").sort_values("error", na_position="last")
    assert list(exchanges["error"].fillna("")) == ["net::ERR_FAILED", ""]
    failed["response"]["_error"] = "net::ERR_FAILED at https://user:SEKRIT2@agent.test/a2a?token=SEKRIT3"
    _har(tmp_path / "y.har", [failed])
    ingest([tmp_path / "y.har"], tmp_path / "out2", TextPolicy())
    (error,) = load(tmp_path / "out2", "exchanges")["error"]
    assert error.startswith("net::ERR_FAILED at https://") and "SEKRIT2" not in error and "SEKRIT3" not in error


def test_the_importers_fields_are_filled_in_each_noted() -> None:
    entry = _entry()
    form = [{"name": "a", "value": "1 2"}, {"name": "b"}]
    entry["request"]["postData"] = {"mimeType": "application/x-www-form-urlencoded", "params": form}
    entry["request"]["headers"].append({"name": "Content-Length", "value": 149})
    del entry["request"]["httpVersion"]
    notes: list[str] = []
    fit = fitted(entry, notes)
    assert fit.entry["request"]["postData"]["text"] == "a=1+2&b="  # a form written only as its params
    assert {"name": "Content-Length", "value": "149"} in fit.entry["request"]["headers"]  # a number as its text
    assert fit.entry["request"]["httpVersion"] == "" and (fit.started, fit.responded) == (True, True)
    assert notes == []
    assert entry["request"]["headers"][-1]["value"] == 149  # the entry itself is left as it was (its id is of it)


@pytest.mark.parametrize("timings", [None, {"send": -1, "wait": -1, "receive": 5.7}], ids=["none", "minimal"])
def test_an_entry_without_its_duration_or_wait_has_no_end_or_first_byte(tmp_path: Path, timings: Any) -> None:
    """An entry without `time` has no end, and one without `timings`, or whose `wait` is -1 (Playwright's "minimal"
    HAR), no first byte: not its start time (a duration of 0 no one measured). Its reply is dated by the one time
    known, so that it is counted on its day and in its order."""
    entry = _entry("minimal")
    del entry["time"], entry["timings"]
    if timings is not None:
        entry["timings"] = timings
    _har(tmp_path / "x.har", [entry])
    ingest([tmp_path / "x.har"], tmp_path / "out", TextPolicy())
    row = load(tmp_path / "out", "exchanges").iloc[0]
    assert row[["ts_first_byte", "ts_end"]].isna().all() and not row[["ts_start"]].isna().any()
    msgs = load(tmp_path / "out", "messages")
    assert sorted(msgs["role"]) == ["agent", "user"] and (msgs["ts"] == row["ts_start"]).all()


_FIELDS = [
    "startedDateTime", "time", "timings", "timings.wait", "request.method", "request.url", "request.headers",
    "request.httpVersion", "request.postData", "request.postData.text", "request.postData.params", "request.bodySize",
    "response", "response.status", "response.headers", "response.httpVersion", "response.content",
    "response.content.text", "response.content.encoding", "response.content.size", "response.bodySize",
    "response._error",
]  # fmt: skip
_HEADER = st.sampled_from(
    [
        "application/json; charset=zip",
        "text/plain; charset=hex",
        "application/json; charset=",
        'application/json; charset="utf-16"',
        "gzip",
        "br, zip",
        "identity",
    ]
)
_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20), st.sampled_from(["base64", "gzip"]),
    st.lists(st.one_of(st.none(), st.integers(), st.text(max_size=5)), max_size=3),
    st.lists(st.fixed_dictionaries({"name": st.one_of(st.none(), st.text(max_size=5)), "value": st.integers()})),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
    st.lists(st.fixed_dictionaries({"name": st.sampled_from(["Content-Type", "Content-Encoding"]), "value": _HEADER}),
             max_size=2),
)  # fmt: skip


@settings(derandomize=True, max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(st.sampled_from(_FIELDS), st.one_of(st.just(KeyError), _VALUES)), min_size=1, max_size=3))
def test_any_field_of_any_type_costs_at_most_that_field(changes: list[tuple[str, Any]]) -> None:
    """Whatever an exporter writes in the fields the importer reads, the entry is an exchange, or is refused for
    the one reason that makes it none (no request method or URL)."""
    entry = _entry("fuzzed")
    for path, value in changes:
        *parents, last = path.split(".")
        holder: Any = entry
        for p in parents:
            holder = holder.get(p) if isinstance(holder, dict) else None
        if isinstance(holder, dict):
            if value is KeyError:
                holder.pop(last, None)
            else:
                holder[last] = value
    try:
        harentry.exchange(entry)
    except ValueError as e:
        assert str(e) in ("request.method missing", "request.url missing")


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("wss://agent.test/a2a", "wss://agent.test:443/a2a"),
        ("ws://agent.test/a2a", "ws://agent.test:80/a2a"),
        ("wss://agent.test:8443/a2a", "wss://agent.test:8443/a2a"),
        ("https://agent.test/a2a", "https://agent.test/a2a"),
    ],
)
def test_a_websocket_url_without_a_port_is_on_its_schemes_default_port(url: str, address: str) -> None:
    """mitmproxy's importer gives every scheme but https port 80: `wss://agent.test/x` was another address."""
    entry = _entry()
    entry["request"]["url"] = url
    assert harentry.exchange(entry).url == address
