"""Progress steps in words, the bar's line, and the child-process relay file
(collectors/progress.py, dashboard/cli/progress.py), in memory."""

from __future__ import annotations

import io

from collectors import progress
from collectors.progress import Step
from dashboard.cli.progress import Bar


def test_a_step_in_words():
    assert Step("storing").text() == "storing"
    assert Step("reading launch", 12, 89).text() == "reading launch 12 of 89"
    assert Step("inflating", 40e6, 120e6, "B").text() == "inflating 40 of 120 MB"
    assert Step("reading x.json", 133e6, None, "B").text() == "reading x.json 133 MB"
    # a file under a megabyte in kB, not "0 of 0 MB"
    assert Step("reading", 108e3, 216e3, "B").text() == "reading 108 of 216 kB"
    assert Step("analysing ranks", 3, 64, "ranks").text() == "analysing ranks 3 of 64"
    assert Step("reading launch", 3, 4).fraction == 0.75 and Step("storing").fraction is None


def test_nobody_listening_costs_nothing_and_a_sink_sees_the_block_only():
    seen = []
    progress.report("lost")
    with progress.reporting(seen.append):
        assert progress.listening()
        progress.report("reading launch", 1, 2)
    progress.report("lost too")
    assert seen == [Step("reading launch", 1, 2)] and not progress.listening()


def test_the_bar_draws_stages_and_fractions_and_clears_its_line():
    out = io.StringIO()
    bar = Bar(out, every_s=0.0)
    for step in (
        Step("inflating", 1e6, None, "B"),
        Step("reading launch", 1, 4),
        Step("reading launch", 4, 4),
        Step("storing"),
    ):
        bar(step)
    bar.close()
    lines = [ln for ln in out.getvalue().split("\r\x1b[2K") if ln]
    assert lines == [
        "inflating 1 MB",
        "reading launch 1 of 4 [######..................]  25 %",
        "reading launch 4 of 4 [########################] 100 %",
        "storing",
    ]
    assert out.getvalue().endswith("\r\x1b[2K")


def test_a_child_writes_its_step_and_the_parent_reads_it(tmp_path):
    path = str(tmp_path / "p.tsv")
    assert progress.read_child(path) is None
    sink = progress.child_sink(path, every_s=0.0)
    sink(Step("reading launch", 7, 9))
    assert progress.read_child(path) == Step("reading launch", 7.0, 9.0, "")
