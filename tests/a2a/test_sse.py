import json

from hypothesis import given
from hypothesis import strategies as st

from converse_tap.a2a.sse import SseParser, parse_sse

EVENTS = [
    {"result": {"task": {"id": "t1", "status": {"state": "TASK_STATE_SUBMITTED"}}}},
    {"result": {"statusUpdate": {"taskId": "t1", "status": {"state": "TASK_STATE_WORKING"}}}},
    {
        "result": {
            "statusUpdate": {
                "taskId": "t1",
                "status": {"state": "TASK_STATE_COMPLETED", "message": {"text": "é✓"}},
            }
        }
    },
]


def _body(sep: str) -> bytes:
    out = f": ping - 2026-12-02 11:44:08{sep}"
    for e in EVENTS:
        out += f"data: {json.dumps(e, ensure_ascii=False)}{sep}{sep}"
    return out.encode()


def _feed_split(body: bytes, cuts: list[int]) -> tuple[list[str], int]:
    parser = SseParser()
    points = sorted({c % (len(body) + 1) for c in cuts})
    events, last = [], 0
    for p in [*points, len(body)]:
        events += parser.feed(body[last:p])
        last = p
    events += parser.close()
    return [e.data for e in events], parser.comments


@given(
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=30),
    sep=st.sampled_from(["\n", "\r\n", "\r"]),
)
def test_events_survive_any_chunking(cuts: list[int], sep: str) -> None:
    data, comments = _feed_split(_body(sep), cuts)
    assert [json.loads(d) for d in data] == EVENTS
    assert comments == 1


def test_multiline_data_event_names_and_ids() -> None:
    body = b'event: error\nid: 7\ndata: {"error":\ndata:  {"code": -32603}}\n\ndata: x\n\n'
    events, _ = parse_sse(body)
    assert [(e.event, e.id, e.data) for e in events] == [
        ("error", "7", '{"error":\n {"code": -32603}}'),
        ("message", "7", "x"),  # the last event id persists, as the standard says
    ]


def test_byte_order_mark_split_across_chunks_is_skipped() -> None:
    parser = SseParser()
    assert parser.feed(b"\xef") == []
    assert parser.feed(b"\xbb") == []
    events = parser.feed(b"\xbfdata: 1\n\n")
    assert [e.data for e in events] == ["1"]


def test_utf8_character_split_across_chunks() -> None:
    body = "data: ✓\n\n".encode()
    cut = body.index(b"\x9c")  # inside the three-byte check mark
    parser = SseParser()
    events = parser.feed(body[:cut]) + parser.feed(body[cut:])
    assert [e.data for e in events] == ["✓"]


def test_event_without_data_is_not_dispatched_and_empty_data_is() -> None:
    events, _ = parse_sse(b"event: ping\n\ndata:\n\n")
    assert [(e.event, e.data) for e in events] == [("message", "")]


def test_oversize_event_is_flagged_not_held() -> None:
    big = b"data: " + b"x" * 5000 + b"\n\ndata: small\n\n"
    parser = SseParser(max_event_bytes=1000)
    events = parser.feed(big[:3000]) + parser.feed(big[3000:])
    assert [(e.oversize, e.data) for e in events] == [(True, ""), (False, "small")]


def test_unterminated_last_event_is_kept_at_close() -> None:
    events, _ = parse_sse(b"data: 1\n\ndata: 2")
    assert [e.data for e in events] == ["1", "2"]


@given(st.binary(max_size=2000))
def test_garbage_never_raises(data: bytes) -> None:
    parse_sse(data)


LINES = [
    b"data: 1",
    b"data:2",
    b"data",
    b": ping",
    b"event: x",
    b"id: 3",
    b"retry: 5",
    b"",
    b"dat",
    b"data: " + b"z" * 40,
]


@given(
    lines=st.lists(st.sampled_from(LINES), max_size=60),
    cuts=st.lists(st.integers(min_value=0, max_value=2_000), max_size=20),
    switch=st.integers(min_value=0, max_value=5),
)
def test_count_only_counts_exactly_what_parsing_dispatches(lines: list[bytes], cuts: list[int], switch: int) -> None:
    """The count-only tail of a long stream (fast scans) counts the same events full parsing dispatches,
    whatever the chunking and wherever counting starts."""
    body = b"\n".join(lines) + b"\n"
    full = SseParser()
    n = len(full.feed(body)) + len(full.close())
    counting = SseParser(max_event_bytes=30)  # small: long lines are skipped while counting, too
    points = sorted({c % (len(body) + 1) for c in cuts})
    last = 0
    for i, p in enumerate([*points, len(body)]):
        counting.count_only = i >= switch
        counting.feed(body[last:p])
        last = p
    counting.count_only = True
    counting.close()
    assert counting.dispatched == n == full.dispatched


def test_shed_drops_the_event_being_gathered_and_the_stream_goes_on() -> None:
    p = SseParser()
    assert p.feed(b"data: first\ndata: abc") == [] and p.held > 0
    p.shed()
    assert p.held == 0
    events = p.feed(b"def" * 1000 + b"\n\ndata: next\n\n")
    assert [(e.oversize, e.data) for e in events] == [(True, ""), (False, "next")]
    assert p.feed(b": a comment that is long") == [] and p.held > 0
    p.shed()  # not a data line: skipped, nothing dispatched for it
    assert p.feed(b" still\ndata: after\n\n")[0].data == "after"


@given(
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=30),
    sep=st.sampled_from(["\n", "\r\n", "\r"]),
    bom=st.booleans(),
)
def test_a_whole_stream_leaves_nothing_pending_whatever_the_chunking(cuts: list[int], sep: str, bom: bool) -> None:
    """`pending` (a stream cut here was cut mid-event) is False once every event is in, however the bytes came:
    a chunk that is only the LF of a CRLF, or only a byte-order mark, holds no piece of a line."""
    body = (b"\xef\xbb\xbf" if bom else b"") + _body(sep)
    parser = SseParser()
    points = sorted({c % (len(body) + 1) for c in cuts})
    last, n = 0, 0
    for p in [*points, len(body)]:
        n += len(parser.feed(body[last:p]))
        last = p
    assert (n, parser.pending) == (len(EVENTS), False)


def test_a_chunk_that_is_the_lf_of_a_crlf_or_a_bom_holds_nothing() -> None:
    parser = SseParser()
    assert parser.feed(b"\xef\xbb\xbf") == [] and not parser.pending
    assert parser.feed(b"data: x\r\n\r") != [] and not parser.pending
    assert parser.feed(b"\n") == [] and not parser.pending
    assert parser.feed(b"data: y") == [] and parser.pending  # an unfinished line is still pending
