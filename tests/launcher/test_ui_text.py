"""What nodes said reaches the terminal as text, never as rich markup.

The done record's message, a store's error, the head's addresses: a node wrote them,
so ``[/tmp/x]`` must not raise (MarkupError) and ``[link=…]`` must not become a link.
"""

from __future__ import annotations

import io

from rich.console import Console

from syndeo.cli.verbs import print_outcome
from syndeo.launcher.deploy import Outcome
from syndeo.launcher.ui import Ui

MESSAGE = "workload failed: see [/tmp/x] and [link=https://evil.example]here[/link] [bold]"


def _ui() -> tuple[Ui, io.StringIO]:
    out = io.StringIO()
    # A terminal with colours: styles are real escape codes, so a link would show.
    console = Console(file=out, force_terminal=True, color_system="truecolor", width=500)
    return Ui(console=console), out


def test_outcome_message_is_printed_as_it_is() -> None:
    ui, out = _ui()
    outcome = Outcome(
        cluster_id="local-1",
        exit_code=1,
        message=MESSAGE,
        lost_ranks=[2],
        timings={"all_joined_s": 1.0, "teardown_done_s": 2.0},
    )
    print_outcome(outcome, ui)
    text = out.getvalue()
    assert f": {MESSAGE}; all nodes joined 1.0 s after the launch, finished after 2.0 s" in text
    assert "\x1b]8;" not in text  # no OSC 8 hyperlink
    assert "\x1b[1mlocal-1" in text  # the launcher's own styling still applies
    assert "nodes lost during the run: ranks [2]" in text
    assert "(torn down)" in text  # the default; "kept up" and "left up" are tested whole


def test_info_shows_a_store_error_as_it_is() -> None:
    ui, out = _ui()
    ui.info("syndeo: cannot read s3://b/[/tmp/x]/head.json: [red]denied")
    assert "syndeo: cannot read s3://b/[/tmp/x]/head.json: [red]denied" in out.getvalue()


def test_outcome_times_the_join_from_the_launch() -> None:
    """A VM target's nodes join during the apply: the time after it returned (0.0 s on the
    emulated AWS) is not the bring-up; the time from the launch is."""
    ui, out = _ui()
    outcome = Outcome(
        cluster_id="aws-1",
        exit_code=0,
        message="workload exited with status 0",
        timings={
            "all_joined_s": 0.0,
            "launch_s": 65.5,
            "launch_to_joined_s": 65.5,
            "teardown_done_s": 97.1,
        },
    )
    print_outcome(outcome, ui)
    assert "all nodes joined 65.5 s after the launch, finished after 97.1 s" in out.getvalue()
