"""Thresholds over a report: the pass/fail decision behind `converse-tap check`."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Threshold:
    metric: str  # unanswered_share | answered_share | abandonment_rate | human_share | anomalies
    bound: str  # "max" | "min"
    limit: float


@dataclass
class Outcome:
    scope: str  # "all" or an agent
    metric: str
    bound: str
    limit: float
    value: float | None
    basis: int  # how many turns / instances / replies / anomalies the value rests on
    basis_name: str
    passed: bool

    @property
    def margin(self) -> float | None:
        """How far past the limit (positive = failing by this much)."""
        if self.value is None:
            return None
        return self.value - self.limit if self.bound == "max" else self.limit - self.value

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "margin": self.margin}


def _metric(sections: dict[str, Any], metric: str, conformance: dict[str, Any] | None) -> tuple[float | None, int, str]:
    cov, auth, rout = sections["coverage"], sections["authors"], sections["routines"]
    if metric == "unanswered_share":
        return cov["by_coverage"]["unanswered"]["share"], cov["turns_assessed"], "assessed turns"
    if metric == "answered_share":
        return cov["by_coverage"]["answered"]["share"], cov["turns_assessed"], "assessed turns"
    if metric == "abandonment_rate":
        return rout["abandonment_rate"], rout["completed"] + rout["abandoned"], "closed routine instances"
    if metric == "human_share":
        return auth["human_share"], auth["replies_with_author"], "replies with an author"
    if metric == "anomalies":
        count = sum(a["count"] for a in (conformance or {}).get("anomalies", []))
        return float(count), count, "anomalies"
    raise ValueError(f"unknown metric {metric!r}")


def evaluate(report: dict[str, Any], thresholds: list[Threshold], per_agent: bool = False) -> list[Outcome]:
    """One outcome per threshold and scope. A value with nothing to rest on (null) passes and says so."""
    scopes: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = [("all", report, report["conformance"])]
    if per_agent:
        scopes = [(agent, g, None) for agent, g in report.get("groups", {}).get("agent", {}).items()]
    out = []
    for scope, sections, conformance in scopes:
        for t in thresholds:
            if t.metric == "anomalies" and conformance is None:
                continue  # anomalies are counted over the whole window, not per agent
            value, basis, name = _metric(sections, t.metric, conformance)
            passed = value is None or (value <= t.limit if t.bound == "max" else value >= t.limit)
            out.append(Outcome(scope, t.metric, t.bound, t.limit, value, basis, name, passed))
    if per_agent:  # anomalies are a property of the whole window
        out += evaluate(report, [t for t in thresholds if t.metric == "anomalies"])
    return out
