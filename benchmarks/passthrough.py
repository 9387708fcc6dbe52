"""A bare-mitmdump baseline that streams SSE like our addon does (a pass-through stream callable)."""


class PassThrough:
    def responseheaders(self, flow):
        if flow.response.headers.get("content-type", "").startswith("text/event-stream"):
            flow.response.stream = lambda chunk: chunk


addons = [PassThrough()]
