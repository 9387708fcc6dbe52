"""Metrics over the recorded dataset: each a function from frames to a frame, usable from a notebook.

from converse_tap.analysis import Engine, build_report, load_frames, replies, turns, coverage_distribution
report = build_report(Engine.over_dataset("converse-tap-data"))   # out of core, any size
frames = load_frames("converse-tap-data")                           # pandas frames, for data that fits
coverage_distribution(turns(replies(frames.messages)))
"""

from .engine import Engine
from .load import Frames, Window, load_frames
from .metrics import (
    adoption,
    anomaly_counts,
    author_share,
    citation_summary,
    conversations,
    coverage_availability,
    coverage_distribution,
    coverage_reasons,
    invocation_outcomes,
    most_cited,
    replies,
    routine_instances,
    routine_summary,
    turns,
)
from .report import REPORT_SCHEMA, build_report
from .stats import wilson

__all__ = [
    "REPORT_SCHEMA",
    "Engine",
    "Frames",
    "Window",
    "adoption",
    "anomaly_counts",
    "author_share",
    "build_report",
    "citation_summary",
    "conversations",
    "coverage_availability",
    "coverage_distribution",
    "coverage_reasons",
    "invocation_outcomes",
    "load_frames",
    "most_cited",
    "replies",
    "routine_instances",
    "routine_summary",
    "turns",
    "wilson",
]
