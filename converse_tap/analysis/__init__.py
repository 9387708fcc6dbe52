"""Metrics over the recorded dataset: each a function from frames to a frame, usable from a notebook.

from converse_tap.analysis import load_frames, replies, turns, coverage_distribution
frames = load_frames("converse-tap-data")
rep = replies(frames.messages)
coverage_distribution(turns(rep))
"""

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
