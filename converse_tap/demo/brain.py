"""The demo agent's behaviour, as pure functions: a small support agent for a restaurant.

It answers from a handful of documents (with citations and a coverage verdict), runs two routines with
required and optional slots, accepts typed routine calls, and lets a person take a conversation over and
hand it back. Everything is decided from the conversation state and the user's words, so runs repeat.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

DOCS: dict[str, tuple[str, str]] = {
    "doc-hours": ("Opening hours", "We are open Tuesday to Sunday, 12:00-15:00 and 18:30-23:00."),
    "doc-allergens": (
        "Allergens",
        "Every dish lists its allergens; gluten-free pasta is available on request.",
    ),
    "doc-parking": ("Parking", "There is no private parking; the public garage on Via Roma is 200 m away."),
    "doc-cancel": ("Cancellation policy", "Bookings can be cancelled free of charge up to 24 hours before."),
    "doc-cancel-2024": (
        "Cancellation policy (2024)",
        "Bookings can be cancelled free of charge up to 48 hours before.",
    ),
    "doc-giftcards": ("Gift cards", "Gift cards are sold at the counter in values of 25, 50 and 100 euros."),
}
TOPICS: list[tuple[tuple[str, ...], list[str]]] = [
    (("open", "hours", "sunday"), ["doc-hours"]),
    (("gluten", "allergen"), ["doc-allergens"]),
    (("park",), ["doc-parking"]),
    (("cancellation",), ["doc-cancel", "doc-cancel-2024"]),  # two versions that disagree
    (("gift card",), ["doc-giftcards"]),
]
UNKNOWN_IN_DOMAIN = ("terrace", "wine", "dog")
OFF_TOPIC = ("stock", "weather", "football")
VAGUE = ("help", "a question")
NOT_ASSESSABLE = ("voucher",)  # the assessor fails on these


@dataclass(frozen=True)
class Slot:
    key: str
    type: str
    required: bool
    description: str


@dataclass(frozen=True)
class Routine:
    tool: str
    name: str
    description: str
    slots: tuple[Slot, ...]

    def input_schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {s.key: {"type": s.type, "description": s.description} for s in self.slots},
            "required": [s.key for s in self.slots if s.required],
        }


ROUTINES = {
    "book_table": Routine("book_table", "Book a table", "Book a table for a date and party size.", (
        Slot("date", "string", True, "Which day (YYYY-MM-DD)?"),
        Slot("partySize", "integer", True, "How many people?"),
        Slot("notes", "string", False, "Anything we should know?"),
    )),
    "cancel_booking": Routine("cancel_booking", "Cancel a booking", "Cancel an existing booking.", (
        Slot("bookingRef", "string", True, "Your booking reference (e.g. TRT-1234)?"),
    )),
}  # fmt: skip
APPROVAL_OVER = 8  # larger parties wait for the manager


@dataclass
class RoutineRun:
    routine: Routine
    values: dict[str, Any] = field(default_factory=dict)
    status: str = "active"

    def open_required(self) -> list[Slot]:
        return [s for s in self.routine.slots if s.required and s.key not in self.values]

    def pending(self) -> list[dict[str, Any]]:
        """Every required slot still open plus the optional ones, as the spec's pendingInput."""
        return [
            {"key": s.key, "type": s.type, "required": s.required, "description": s.description}
            for s in self.routine.slots
            if s.key not in self.values
        ]


@dataclass
class Conversation:
    owner: str = "ai_owned"
    routine: RoutineRun | None = None
    bookings: int = 0


@dataclass
class Reply:
    text: str
    envelope: dict[str, Any]
    task_state: str | None = None  # None: a plain Message; else the Task's state after this turn
    artifact: dict[str, Any] | None = None


_DATE = re.compile(r"\b(\d{4}-\d{2}-\d{2})\b")
_PARTY = re.compile(r"\b(\d+)\s+(?:people|guests|persons)\b")
_REF = re.compile(r"\b([A-Z]{3}-\d{4})\b")
_NOTES = re.compile(r"notes?:\s*(.+)$", re.IGNORECASE)


def _coverage(
    availability: str, coverage: str | None = None, reason: str | None = None, turn: str = ""
) -> dict[str, Any]:
    cov: dict[str, Any] = {
        "availability": availability,
        "originatingTurnId": turn,
        "originatingRequestId": f"req-{turn}",
    }
    if coverage:
        cov["coverage"] = coverage
    if reason:
        cov["reason"] = reason
    return cov


def answer(text: str, turn: str) -> tuple[str, dict[str, Any], list[str]]:
    """Answer a question from the documents: (reply text, answerCoverage, cited document ids)."""
    low = text.lower()
    if any(w in low for w in NOT_ASSESSABLE):
        return "Vouchers are handled by the front desk.", _coverage("failed", turn=turn), []
    if any(w in low for w in OFF_TOPIC):
        return (
            "I can only help with the restaurant.",
            _coverage("assessed", "unanswered", "intentional_scope_boundary", turn),
            [],
        )
    docs = [d for words, ids in TOPICS if any(w in low for w in words) for d in ids]
    unknown = any(w in low for w in UNKNOWN_IN_DOMAIN)
    if not docs:
        if unknown:
            return (
                "I don't have anything on that, sorry.",
                _coverage("assessed", "unanswered", "insufficient_evidence", turn),
                [],
            )
        if any(w in low for w in VAGUE):
            return (
                "Happy to help. What would you like to know?",
                _coverage("assessed", "unclear", "ambiguous_request", turn),
                [],
            )
        return "Could you tell me more?", _coverage("assessed", "unclear", "ambiguous_request", turn), []
    body = " ".join(DOCS[d][1] for d in docs)
    if len(docs) > 1:
        return (
            f"Our documents disagree: {body}",
            _coverage("assessed", "partial", "conflicting_evidence", turn),
            docs,
        )
    if unknown:
        return (
            f"{body} I can't tell you more than that.",
            _coverage("assessed", "partial", "insufficient_evidence", turn),
            docs,
        )
    return body, _coverage("assessed", "answered", "sufficient_evidence", turn), docs


def _citations(docs: list[str]) -> list[dict[str, Any]]:
    out = []
    for d in docs:
        entry = {"documentId": d, "chunkId": f"{d}#1", "title": DOCS[d][0]}
        if d == "doc-hours":
            entry["sourceUrl"] = "https://trattoria.example/hours"
        out.append(entry)
    return out


def _fill(run: RoutineRun, text: str, args: dict[str, Any] | None) -> None:
    if args:
        for s in run.routine.slots:
            if s.key in args and args[s.key] not in (None, ""):
                run.values[s.key] = args[s.key]
    if run.routine.tool == "book_table":
        if m := _DATE.search(text):
            run.values["date"] = m.group(1)
        if m := _PARTY.search(text):
            run.values["partySize"] = int(m.group(1))
        if m := _NOTES.search(text):
            run.values["notes"] = m.group(1).strip()
    elif m := _REF.search(text):
        run.values["bookingRef"] = m.group(1)


def _routine_env(run: RoutineRun) -> dict[str, Any]:
    env: dict[str, Any] = {"toolName": run.routine.tool, "name": run.routine.name, "status": run.status}
    env["pendingInput"] = run.pending() if run.status == "waiting_for_input" else []
    return env


def _advance(
    conv: Conversation, run: RoutineRun, turn: str, invocation: dict[str, Any] | None, approved: bool = False
) -> Reply:
    """Move a routine on after its slots were filled from this turn."""
    envelope: dict[str, Any] = {
        "author": "agent",
        "answerCoverage": _coverage("not_recorded", turn=turn),
        "ownership": {"state": conv.owner, "suppressed": False},
    }
    if invocation:
        envelope["invocation"] = invocation
    book = run.routine.tool == "book_table"
    if run.open_required():
        run.status = "waiting_for_input"
        question = " ".join(s.description for s in run.open_required())
        envelope["routine"] = _routine_env(run)
        return Reply(question, envelope, "TASK_STATE_INPUT_REQUIRED")
    if (
        book
        and not approved
        and int(run.values.get("partySize", 0)) > APPROVAL_OVER
        and run.status != "waiting_for_approval"
    ):
        run.status = "waiting_for_approval"
        envelope["routine"] = _routine_env(run)
        return Reply(
            "Parties that large need the manager's approval. Reply 'ok' to wait for it.",
            envelope,
            "TASK_STATE_INPUT_REQUIRED",
        )
    run.status = "completed"
    envelope["routine"] = _routine_env(run)
    conv.routine = None
    if book:
        conv.bookings += 1
        ref = f"TRT-{1000 + conv.bookings}"
        artifact = {"name": "booking", "text": f"Booking {ref}", "data": {"ref": ref, **run.values}}
        return Reply(
            f"Booked for {run.values['partySize']} on {run.values['date']}: reference {ref}.",
            envelope,
            "TASK_STATE_COMPLETED",
            artifact,
        )
    return Reply(f"Booking {run.values['bookingRef']} is cancelled.", envelope, "TASK_STATE_COMPLETED")


def respond(conv: Conversation, text: str, turn: str, call: dict[str, Any] | None = None) -> Reply:
    """The agent's reply to one user message. `call` is a typed routine call {toolName, arguments}."""
    low = text.lower()
    own = {"state": conv.owner, "suppressed": False}

    if call is not None:
        return _invoke(conv, call, turn)

    if conv.owner == "human_owned":
        if "back to the assistant" in low:
            conv.owner = "ai_owned"
            return Reply(
                "You're back with the assistant.",
                {
                    "author": "agent",
                    "answerCoverage": _coverage("not_recorded", turn=turn),
                    "ownership": {"state": "ai_owned", "suppressed": False},
                },
            )
        if "?" in text:
            return Reply(
                "Hi, Giulia here from the restaurant. Let me check that for you.",
                {"author": "human", "answerCoverage": _coverage("not_recorded", turn=turn), "ownership": own},
            )
        return Reply(
            "(a colleague is handling this conversation)",
            {
                "answerCoverage": _coverage("not_recorded", turn=turn),
                "ownership": {"state": "human_owned", "suppressed": True},
            },
        )

    if "talk to a person" in low:
        conv.owner = "human_owned"
        return Reply(
            "I'm handing you over to a colleague.",
            {
                "author": "agent",
                "answerCoverage": _coverage("not_recorded", turn=turn),
                "ownership": {"state": "human_owned", "suppressed": False},
            },
        )

    run = conv.routine
    if run is not None:
        if "never mind" in low:
            run.status = "abandoned"
            conv.routine = None
            return Reply(
                "No problem, I've dropped it.",
                {
                    "author": "agent",
                    "answerCoverage": _coverage("not_recorded", turn=turn),
                    "ownership": own,
                    "routine": _routine_env(run),
                },
                "TASK_STATE_CANCELED",
            )
        approved = run.status == "waiting_for_approval" and low.strip(" .!") == "ok"
        _fill(run, text, None)
        return _advance(conv, run, turn, None, approved=approved)

    if "book a table" in low or "cancel my reservation" in low:
        run = RoutineRun(ROUTINES["book_table" if "book a table" in low else "cancel_booking"])
        conv.routine = run
        _fill(run, text, None)
        return _advance(conv, run, turn, None)

    if low.strip(" .!") in ("thanks", "thank you", "ok thanks"):
        return Reply(
            "You're welcome!",
            {"author": "agent", "answerCoverage": _coverage("not_recorded", turn=turn), "ownership": own},
        )

    body, coverage, docs = answer(text, turn)
    envelope: dict[str, Any] = {"author": "agent", "answerCoverage": coverage, "ownership": own}
    if docs:
        envelope["citations"] = _citations(docs)
    return Reply(body, envelope)


def _invoke(conv: Conversation, call: dict[str, Any], turn: str) -> Reply:
    tool = call.get("toolName")
    args = call.get("arguments")
    own = {"state": conv.owner, "suppressed": False}
    base = {"author": "agent", "answerCoverage": _coverage("not_recorded", turn=turn), "ownership": own}
    if tool not in ROUTINES:
        return Reply(
            f"I don't know a routine called {tool}.",
            {**base, "invocation": {"toolName": tool, "outcome": "unknown_tool"}},
        )
    if not isinstance(args, dict):
        return Reply(
            "That call had no usable arguments.",
            {**base, "invocation": {"toolName": tool, "outcome": "not_started"}},
        )
    if tool == "cancel_booking" and conv.bookings == 0:
        return Reply(
            "There is no booking in this conversation to cancel.",
            {**base, "invocation": {"toolName": tool, "outcome": "declined"}},
        )
    run = conv.routine
    if run is not None and run.routine.tool == tool:
        _fill(run, "", args)
        return _advance(conv, run, turn, {"toolName": tool, "outcome": "reentered"})
    run = RoutineRun(ROUTINES[tool])
    conv.routine = run
    _fill(run, "", args)
    return _advance(conv, run, turn, {"toolName": tool, "outcome": "started"})
