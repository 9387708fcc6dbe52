"""A gRPC response tapped live, in any of its forms, split into messages as its chunks reach the worker.

`application/grpc[+codec]`, gRPC-Web `application/grpc-web[+codec]` and its base64 text form: the chunks of the
text form are decoded as they come (`grpc_web.Base64Stream`: a chunk may end inside a quad), the messages go to
the extractor with their codec as each is whole, and gRPC-Web's trailers frame is kept for the end, where it gives
the call's status. Past `max_events` messages the frame parser only counts (no copy, no decompression), and the
count is added at the end. The rows are those the same response gives read whole (`extract`).
"""

from __future__ import annotations

from ..a2a.extract import Extractor
from ..a2a.grpc_codecs import GrpcContent
from ..a2a.grpc_frames import GrpcFrame, GrpcFrameParser, parser_anomalies
from ..a2a.grpc_web import Base64Stream


class GrpcLive:
    __slots__ = ("content", "failed", "frames", "past", "taken", "text")

    def __init__(self, content: GrpcContent, max_message_bytes: int, encoding: str) -> None:
        self.content = content
        self.frames = GrpcFrameParser(max_message_bytes, encoding, web=content.web)
        self.text = Base64Stream() if content.text else None
        self.taken = 0  # frames the parser returned (the others it only counted)
        self.past = False  # a message past max_events was counted (and said)
        self.failed = False  # a bug, or input nobody foresaw: the rest of the response is not split

    @property
    def held(self) -> int:
        return self.frames.held + (self.text.held if self.text is not None else 0)

    def shed(self) -> None:
        self.frames.shed()

    def feed(self, extractor: Extractor, chunk: bytes, received: float | None, max_events: int) -> None:
        if self.failed:
            return
        try:
            data = self.text.feed(chunk) if self.text is not None else chunk
            self._take(extractor, self.frames.feed(data, received), max_events)
        except Exception as e:  # the stream stays recorded, unsplit from here
            self._fail(extractor, e)

    def _fail(self, extractor: Extractor, e: Exception) -> None:
        self.failed = True
        extractor.note(f"grpc_parse_failed:{type(e).__name__}"[:200])

    def _take(self, extractor: Extractor, frames: list[GrpcFrame], max_events: int) -> None:
        """Each message parsed as it comes and not kept; past max_events, counted (by the parser from then on)."""
        codec = self.content.codec
        for frame in frames:
            self.taken += 1
            if not frame.trailers and extractor.n_events >= max_events:
                self._past(extractor, max_events)
                extractor.n_events += 1
                continue
            try:
                extractor.grpc_message(frame, codec)
            except Exception as e:  # a bug, or an input we did not foresee: it costs only this message
                extractor.note(f"grpc_message_failed:{extractor.n_events - 1}:{type(e).__name__}")
        if extractor.n_events >= max_events:
            self.frames.count_only = True

    def _past(self, extractor: Extractor, max_events: int) -> None:
        if not self.past:
            self.past = True
            extractor.note(f"grpc_messages_not_parsed_past:{max_events}")

    def close(self, extractor: Extractor, received: float | None, max_events: int) -> None:
        """The end of the response: the text's last characters decoded, what was only counted added, and the
        framing's notes left for `finish` (which puts them where a whole body's go)."""
        parser = self.frames
        if self.text is not None and not self.failed:
            try:
                self._take(extractor, parser.feed(self.text.close(), received), max_events)
            except Exception as e:
                self._fail(extractor, e)
        counted = parser.messages - self.taken - parser.unfinished() - parser.trailers_counted
        if counted > 0:
            self._past(extractor, max_events)
            extractor.n_events += counted
        web = extractor.web
        web.frames += parser.trailers_counted
        if parser.counted_after_trailers and not web.late:
            web.late = True
            extractor.note("grpc_web_message_after_trailers")
        if self.text is not None and self.text.bad:
            web.notes.append("grpc_web_text_not_base64")
        web.notes += parser_anomalies(parser)
