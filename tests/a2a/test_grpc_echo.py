"""The extension's echo in gRPC trailers is compared as the agent sent it, as the JSON bindings' header echo is:
redaction lower-cases a scheme and drops a fragment or userinfo, so a stored URI can equal the extension's exact
URI when the echo was not it."""

import pytest
from a2a.types import a2a_pb2 as pb

from converse_tap.a2a.extract import extract
from converse_tap.a2a.redact import TextPolicy
from tests.a2a.grpc_helpers import frame, grpc_exchange
from tests.factories import EXT, envelope


def _exchange(echo: str) -> dict:
    msg = pb.Message(message_id="a-1", context_id="c-1", role=pb.ROLE_AGENT, parts=[pb.Part(text="Open 12-15.")])
    msg.extensions.append(EXT)
    msg.metadata.update({EXT: envelope()})
    request = pb.SendMessageRequest(
        message=pb.Message(message_id="u-1", context_id="c-1", role=pb.ROLE_USER, parts=[pb.Part(text="Hours?")])
    )
    ex = grpc_exchange(
        "SendMessage",
        request.SerializeToString(),
        frame(pb.SendMessageResponse(message=msg).SerializeToString()),
        trailers=[("grpc-status", "0"), ("a2a-extensions", echo)],
        response_headers=[("content-type", "application/grpc")],  # the echo in trailers only
    )
    out = extract(ex, TextPolicy())
    assert out is not None
    return out.exchange


def test_the_exact_uri_in_trailers_is_an_echo() -> None:
    row = _exchange(EXT)
    assert row["converse_echoed"] is True
    assert not [a for a in row["anomalies"] if a.startswith("extension_")]


@pytest.mark.parametrize("echo", [EXT.replace("https", "HTTPS", 1), EXT + "#x", EXT + "/"])
def test_a_near_miss_in_trailers_is_no_echo_and_is_named(echo: str) -> None:
    row = _exchange(echo)
    assert row["converse_echoed"] is False
    assert [a for a in row["anomalies"] if a.startswith("extension_uri_variant:extensions_echoed:")], row["anomalies"]
