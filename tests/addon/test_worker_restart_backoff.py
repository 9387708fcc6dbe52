"""A recording worker that cannot run (its dataset directory replaced by a file, a disk full at its start, an OOM
kill at each start) was started again every second or two for as long as A2A traffic flowed, each start a second
of CPU for its imports and a traceback in the log. The back-off now doubles while workers die soon after their
start, up to a minute, and the worker says what stopped it in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from converse_tap.addon import channel as channel_module
from converse_tap.addon.channel import RESTART_BACKOFF, RESTART_BACKOFF_MAX, Channel

RECORD = ("e", "nobody", (None, None), None, False)  # a stream end no worker saw open: no rows


def _config(root: Path) -> dict[str, object]:
    return {
        **{"dir": str(root), "text": "keep", "salt": "", "summary": "off"},
        **{"flush_interval": 0.05, "rollover_rows": 1000, "rollover_seconds": 300.0},
        **{"max_body": 1 << 20, "max_events": 100},
    }


def _until_found_dead(channel: Channel) -> None:
    proc = channel._proc
    assert proc is not None
    proc.wait(60)  # the worker fails at its start
    channel.send(RECORD)  # the write finds it dead


def test_workers_that_die_at_their_start_are_restarted_ever_more_slowly(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "data"
    root.mkdir()
    (root / "_journal").write_text("not a folder")  # what the worker claims its journal folder in
    channel = Channel(_config(root))
    channel.start()
    backoffs = []
    for _ in range(9):
        _until_found_dead(channel)
        assert channel._proc is None
        backoffs.append(channel.backoff)
        assert not channel.send(RECORD)  # refused during the back-off, and counted
        channel._down_until = 0.0  # (the back-off over, without waiting for it)
        assert channel.send(RECORD)  # starts the next worker
    assert backoffs == [min(RESTART_BACKOFF * 2**i, RESTART_BACKOFF_MAX) for i in range(9)]
    assert backoffs[-1] == RESTART_BACKOFF_MAX
    channel.close()
    err = capfd.readouterr().err
    assert "the recording worker cannot write the dataset: " in err and "_journal exists and is not a directory" in err
    assert "Traceback" not in err


def test_a_worker_that_ran_steadily_is_replaced_after_the_first_back_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "data"
    root.mkdir()
    (root / "_journal").write_text("not a folder")
    channel = Channel(_config(root))
    channel.start()
    for _ in range(3):
        _until_found_dead(channel)
        channel._down_until = 0.0
        channel.send(RECORD)
    assert channel.backoff == 4 * RESTART_BACKOFF
    monkeypatch.setattr(channel_module, "STEADY", 0.0)  # the last worker counts as one that ran for long
    _until_found_dead(channel)
    assert channel.backoff == RESTART_BACKOFF
    channel.close()


def test_a_death_found_while_writing_a_note_of_losses_is_one_death(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The note of earlier losses, written first, found the worker dead; the record after it was then written to
    the dead worker's descriptor, closed by then (or, its number reused, another file's or connection's): a second
    death logged and counted, and the back-off doubled twice."""
    import os
    import signal

    monkeypatch.setattr(channel_module, "GAP_EVERY", 0.0)  # a note of losses goes with every record
    channel = Channel(_config(tmp_path / "data"))
    channel.start()
    proc = channel._proc
    assert proc is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    channel.count_lost("recorder_stopped")  # a loss to write down with the next record
    assert not channel.send(RECORD)  # the note's write finds the worker dead: the record is refused, counted
    assert sum("the recording worker stopped" in r.getMessage() for r in caplog.records) == 1
    assert channel.backoff == RESTART_BACKOFF
    channel.close()
