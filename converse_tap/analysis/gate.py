"""Thresholds over a report: the pass/fail decision behind `converse-tap check`."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Threshold:
    metric: str  # unanswered_share | answered_share | abandonment_rate | human_share | anomalies
    bound: str  # "max" | "min"
    limit: float
    min_basis: int = 0  # fail when the value rests on fewer turns / instances / replies than this


@dataclass
class Outcome:
    scope: str  # "all" or an agent
    metric: str
    bound: str
    limit: float
    value: float | None
    basis: int  # how many turns / instances / replies / exchanges the value rests on
    basis_name: str
    passed: bool
    min_basis: int = 0
    empty: bool = False  # nothing measured: the basis is empty

    @property
    def too_few(self) -> bool:
        """Measured on fewer than the threshold's minimum basis."""
        return self.basis < self.min_basis

    @property
    def margin(self) -> float | None:
        """How far past the limit (positive = failing by this much)."""
        if self.value is None:
            return None
        return self.value - self.limit if self.bound == "max" else self.limit - self.value

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "margin": self.margin}


def _metric(
    sections: dict[str, Any] | None, metric: str, conformance: dict[str, Any] | None, exchanges: int
) -> tuple[float | None, int, str]:
    if metric == "anomalies":
        count = sum(a["count"] for a in (conformance or {}).get("anomalies", []))
        return float(count), exchanges, "exchanges"
    names = {
        "unanswered_share": "assessed turns",
        "answered_share": "assessed turns",
        "abandonment_rate": "closed routine instances",
        "human_share": "replies with an author",
    }
    if metric not in names:
        raise ValueError(f"unknown metric {metric!r}")
    if sections is None:  # a scope with no traffic in the window
        return None, 0, names[metric]
    cov, auth, rout = sections["coverage"], sections["authors"], sections["routines"]
    if metric == "unanswered_share":
        return cov["by_coverage"]["unanswered"]["share"], cov["turns_assessed"], names[metric]
    if metric == "answered_share":
        return cov["by_coverage"]["answered"]["share"], cov["turns_assessed"], names[metric]
    if metric == "abandonment_rate":
        return rout["abandonment_rate"], rout["completed"] + rout["abandoned"], names[metric]
    return auth["human_share"], auth["replies_with_author"], names[metric]


def evaluate(
    report: dict[str, Any],
    thresholds: list[Threshold],
    per_agent: bool = False,
    allow_empty: bool = False,
) -> list[Outcome]:
    """One outcome per threshold and scope. A threshold whose basis is empty (nothing measured: no assessed
    turns, no closed routine instances, no exchanges) is `empty` and fails, unless `allow_empty`; one measured on
    fewer than its `min_basis` fails. Per agent, the scopes are the agents with traffic in the window and every
    agent the window names."""
    exchanges = report["dataset"]["exchanges"]
    scopes: list[tuple[str, dict[str, Any] | None, dict[str, Any] | None]] = [("all", report, report["conformance"])]
    if per_agent:
        groups = report.get("groups", {}).get("agent", {})
        named = report["dataset"]["filters"]["agents"] or []
        scopes = [(agent, groups.get(agent), None) for agent in sorted({*groups, *named})]
        scopes = scopes or [("any agent", None, None)]
    out = []
    for scope, sections, conformance in scopes:
        for t in thresholds:
            if t.metric == "anomalies" and conformance is None:
                continue  # anomalies are counted over the whole window, not per agent
            value, basis, name = _metric(sections, t.metric, conformance, exchanges)
            empty = basis == 0
            within = value is not None and (value <= t.limit if t.bound == "max" else value >= t.limit)
            passed = (allow_empty or not empty) and (within or value is None) and basis >= t.min_basis
            out.append(Outcome(scope, t.metric, t.bound, t.limit, value, basis, name, passed, t.min_basis, empty))
    if per_agent:  # anomalies are a property of the whole window
        out += evaluate(report, [t for t in thresholds if t.metric == "anomalies"], allow_empty=allow_empty)
    return out
