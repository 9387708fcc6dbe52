"""Conversation plans chosen from a seed, each with the ground truth its author intended.

The expectations here are written by hand per conversation kind, not computed by calling the agent's
logic: the end-to-end test compares them with what the report finds in the recorded traffic.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

# question, availability, coverage, reason
QUESTIONS: list[tuple[str, str, str | None, str | None]] = [
    ("When are you open on Sunday?", "assessed", "answered", "sufficient_evidence"),
    ("Do you have gluten-free pasta?", "assessed", "answered", "sufficient_evidence"),
    ("Where can I park nearby?", "assessed", "answered", "sufficient_evidence"),
    ("Do you sell gift cards?", "assessed", "answered", "sufficient_evidence"),
    ("What is your cancellation policy?", "assessed", "partial", "conflicting_evidence"),
    ("Is the terrace open on Sunday?", "assessed", "partial", "insufficient_evidence"),
    ("Which wines do you serve?", "assessed", "unanswered", "insufficient_evidence"),
    ("What's the weather tomorrow?", "assessed", "unanswered", "intentional_scope_boundary"),
    ("I have a question", "assessed", "unclear", "ambiguous_request"),
    ("Can I pay with a voucher?", "failed", None, None),
]
BOOK, CANCEL = "Book a table", "Cancel a booking"
KINDS = ["qa", "qa", "qa", "book", "book_approval", "book_abandon", "book_walkaway", "book_twice", "cancel",
         "typed", "handover"]  # fmt: skip


@dataclass
class Step:
    text: str
    call: dict[str, Any] | None = None


@dataclass
class Truth:
    """What one or more conversations should show in the report."""

    conversations: int = 0
    availability: Counter[str] = field(default_factory=Counter)
    coverage: Counter[str] = field(default_factory=Counter)
    reasons: Counter[str] = field(default_factory=Counter)
    authors: Counter[str] = field(default_factory=Counter)
    suppressed: int = 0
    conversations_with_human: int = 0
    handoffs_to_human: int = 0
    handbacks_to_agent: int = 0
    routines: dict[str, Counter[str]] = field(default_factory=dict)
    abandoned_at: Counter[tuple[str, str]] = field(default_factory=Counter)
    invocations: Counter[str] = field(default_factory=Counter)

    def turn(
        self,
        author: str | None = "agent",
        availability: str = "not_recorded",
        coverage: str | None = None,
        reason: str | None = None,
    ) -> None:
        self.availability[availability] += 1
        if availability == "assessed":
            self.coverage[str(coverage)] += 1
            self.reasons[str(reason)] += 1
        if author:
            self.authors[author] += 1

    def routine(self, name: str, outcome: str) -> None:
        self.routines.setdefault(name, Counter())[outcome] += 1

    def add(self, other: Truth) -> None:
        for name in (
            "conversations",
            "suppressed",
            "conversations_with_human",
            "handoffs_to_human",
            "handbacks_to_agent",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for name in ("availability", "coverage", "reasons", "authors", "abandoned_at", "invocations"):
            getattr(self, name).update(getattr(other, name))
        for name, counts in other.routines.items():
            self.routines.setdefault(name, Counter()).update(counts)

    def as_report_keys(self) -> dict[str, Any]:
        """The truth in the report's vocabulary (converse-tap-report/1 keys)."""
        outcomes: Counter[str] = Counter()
        for counts in self.routines.values():
            outcomes.update(counts)
        return {
            "coverage.turns_with_coverage": sum(self.availability.values()),
            "coverage.turns_assessed": self.availability["assessed"],
            "coverage.by_coverage": dict(sorted(self.coverage.items())),
            "coverage.by_reason": dict(sorted(self.reasons.items())),
            "coverage.by_availability": dict(sorted(self.availability.items())),
            "authors.by_author": dict(sorted(self.authors.items())),
            "authors.conversations": self.conversations,
            "authors.conversations_with_human": self.conversations_with_human,
            "authors.suppressed_turns": self.suppressed,
            "authors.handoffs_to_human": self.handoffs_to_human,
            "authors.handbacks_to_agent": self.handbacks_to_agent,
            "routines.instances": sum(outcomes.values()),
            "routines.completed": outcomes["completed"],
            "routines.abandoned": outcomes["abandoned"],
            "routines.open": outcomes["open"],
            "routines.by_routine": {
                k: {o: v[o] for o in ("completed", "abandoned", "open")} for k, v in sorted(self.routines.items())
            },
            "routines.abandoned_at": {f"{r}/{s}": n for (r, s), n in sorted(self.abandoned_at.items())},
            "invocations.by_outcome": dict(sorted(self.invocations.items())),
        }


@dataclass
class Plan:
    index: int
    kind: str
    agent: str
    steps: list[Step]
    truth: Truth
    binding: str = "JSONRPC"
    dialect: str = "1.0"
    streaming: bool = False
    extension: bool = True
    poll: bool = False
    resubscribe: bool = False


def _date(rng: random.Random) -> str:
    return f"2026-12-{rng.randint(10, 30)}"


def _qa(rng: random.Random, t: Truth) -> list[Step]:
    steps = []
    for q, avail, cov, reason in rng.sample(QUESTIONS, rng.randint(1, 3)):
        steps.append(Step(q))
        t.turn("agent", avail, cov, reason)
    if rng.random() < 0.5:
        steps.append(Step("Thanks!"))
        t.turn("agent")
    return steps


def _book(rng: random.Random, t: Truth) -> list[Step]:
    if rng.random() < 0.5:
        steps = [
            Step("I'd like to book a table"),
            Step(f"On {_date(rng)}"),
            Step(f"For {rng.randint(1, 8)} people"),
        ]
    else:
        steps = [
            Step(f"I'd like to book a table on {_date(rng)}"),
            Step(f"For {rng.randint(1, 8)} people, notes: window"),
        ]
    for _ in steps:
        t.turn()
    t.routine(BOOK, "completed")
    return steps


def build_plan(index: int, rng: random.Random, agents: list[str]) -> Plan:
    kind = rng.choice(KINDS)
    t = Truth(conversations=1)
    if kind == "qa":
        steps = _qa(rng, t)
    elif kind == "book":
        steps = _book(rng, t)
    elif kind == "book_approval":
        steps = [
            Step(f"I'd like to book a table on {_date(rng)} for {rng.randint(9, 20)} people"),
            Step("ok"),
        ]
        t.turn()
        t.turn()
        t.routine(BOOK, "completed")
    elif kind == "book_abandon":
        if rng.random() < 0.5:
            steps = [Step("I'd like to book a table"), Step(f"On {_date(rng)}"), Step("Never mind")]
            t.abandoned_at[(BOOK, "partySize")] += 1
        else:
            steps = [Step("I'd like to book a table"), Step("Never mind")]
            t.abandoned_at[(BOOK, "date")] += 1
            t.abandoned_at[(BOOK, "partySize")] += 1
        for _ in steps:
            t.turn()
        t.routine(BOOK, "abandoned")
    elif kind == "book_walkaway":
        steps = [Step("I'd like to book a table"), Step(f"On {_date(rng)}")]
        t.turn()
        t.turn()
        t.routine(BOOK, "open")
    elif kind == "book_twice":
        steps = [
            Step(f"I'd like to book a table on {_date(rng)} for 2 people"),
            Step(f"I'd like to book a table on {_date(rng)} for 4 people"),
        ]
        t.turn()
        t.turn()
        t.routine(BOOK, "completed")
        t.routine(BOOK, "completed")
    elif kind == "cancel":
        steps = [Step("I need to cancel my reservation"), Step(f"It's TRT-{rng.randint(1000, 9999)}")]
        t.turn()
        t.turn()
        t.routine(CANCEL, "completed")
    elif kind == "typed":
        steps = [
            Step("(routine call)", {"toolName": "cancel_booking", "arguments": {}}),
            Step("(routine call)", {"toolName": "order_pizza", "arguments": {"size": "large"}}),
            Step("(routine call)", {"toolName": "book_table", "arguments": "tomorrow"}),
            Step(
                "(routine call)",
                {"toolName": "book_table", "arguments": {"date": _date(rng), "partySize": 2}},
            ),
            Step("I'd like to book a table"),
            Step("(routine call)", {"toolName": "book_table", "arguments": {"date": _date(rng)}}),
            Step("For 3 people"),
        ]
        for _ in steps:
            t.turn()
        t.invocations.update(["declined", "unknown_tool", "not_started", "started", "reentered"])
        t.routine(BOOK, "completed")
        t.routine(BOOK, "completed")
    else:  # handover
        steps = [
            Step("When are you open on Sunday?"),
            Step("Can I talk to a person?"),
            Step("Is the terrace heated?"),
            Step("ok thanks"),
            Step("Back to the assistant please"),
            Step("Where can I park nearby?"),
        ]
        t.turn("agent", "assessed", "answered", "sufficient_evidence")
        t.turn("agent")
        t.turn("human")
        t.turn(None)
        t.suppressed += 1
        t.turn("agent")
        t.turn("agent", "assessed", "answered", "sufficient_evidence")
        t.conversations_with_human = 1
        t.handoffs_to_human = t.handbacks_to_agent = 1
    plan = Plan(index, kind, rng.choice(agents), steps, t)
    plan.binding = rng.choice(["JSONRPC", "HTTP+JSON"])
    plan.dialect = rng.choice(["1.0", "1.0", "0.3"])
    plan.streaming = rng.random() < 0.5
    plan.extension = rng.random() < 0.85
    plan.poll = rng.random() < 0.3
    plan.resubscribe = plan.streaming and rng.random() < 0.4
    if not plan.extension:
        plan.truth = Truth()  # no envelope on the wire: nothing for the converse metrics
    return plan


def build_plans(n: int, seed: int, agents: list[str]) -> list[Plan]:
    rng = random.Random(seed)
    return [build_plan(i, rng, agents) for i in range(n)]
