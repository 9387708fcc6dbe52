"""Reverse mode's blind spot: an agent card, fetched through the recorder, that sends clients to the agent itself.

Every client that follows such a card talks to the agent directly and is not recorded; the recording worker says
so in its log, once per card and interface, for the first MAX_WARNED of them (a client can fetch the card at ever
new URLs: remembering each would grow the worker's memory, and its log, without bound)."""

from __future__ import annotations

import logging

from ..a2a.extract import Extraction
from ..a2a.urls import host_port

log = logging.getLogger("converse_tap.worker")
MAX_WARNED = 100


class BypassCheck:
    def __init__(self) -> None:
        self.warned: set[tuple[str, str]] = set()
        self._failed = False

    def __call__(self, ext: Extraction) -> None:
        """Check the cards of a GET captured by a reverse-mode proxy; advice for the operator, so it never raises
        (the exchange is recorded whatever the check makes of it)."""
        try:
            self._check(ext)
        except Exception:
            if not self._failed:
                self._failed = True
                log.exception("converse-tap: the reverse-mode card check failed (logged once)")

    def _check(self, ext: Extraction) -> None:
        agent = host_port(ext.exchange["url"] or "")
        for card in ext.agent_cards:
            for interface in card["interfaces"] or []:
                url = interface.get("url") or ""
                if agent[1] is None or host_port(url) != agent:  # (a port that is none: never the agent)
                    continue
                key = (card["url"], url)
                if key in self.warned or len(self.warned) > MAX_WARNED:
                    continue
                if len(self.warned) == MAX_WARNED:
                    self.warned.add(("", ""))  # full: said once
                    log.warning(
                        "converse-tap: more agent cards fetched through this reverse-mode recorder advertise the "
                        "agent itself; after %d, they are not logged",
                        MAX_WARNED,
                    )
                    continue
                self.warned.add(key)
                log.warning(
                    "converse-tap: the agent card at %s advertises %s, the agent itself: clients that follow "
                    "the card bypass this reverse-mode recorder and are not recorded (see README, 'Which "
                    "proxy mode')",
                    card["url"],
                    url,
                )
