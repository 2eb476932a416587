"""Live progress for launchers: one status line, redrawn; plain lines when not a TTY."""

from __future__ import annotations

import sys
from types import TracebackType

from rich.console import Console
from rich.live import Live
from rich.text import Text

from syndeo.rendezvous import StatusRecord


def _fmt_status(cluster_id: str, st: StatusRecord | None, phase_hint: str) -> Text:
    if st is None:
        return Text(f"{cluster_id}: {phase_hint}", style="dim")
    line = Text(f"{cluster_id}: ", style="bold")
    line.append(st.phase, style="cyan")
    line.append(f"  nodes {len(st.nodes_joined)}/{st.nodes_expected}")
    if st.groups:
        line.append(" (" + ", ".join(f"{g} {j}/{n}" for g, (j, n) in st.groups.items()) + ")")
    if st.nodes_lost:
        line.append(f"  lost rank {', '.join(map(str, st.nodes_lost))}", style="bold red")
    if st.interrupted:
        ranks = ", ".join(str(n.rank) for n in st.interrupted)
        line.append(f"  spot notice rank {ranks}", style="bold yellow")
    prog = st.progress
    if "samples" in prog:
        target = prog.get("samples_target")
        line.append(f"  samples {int(prog['samples']):,}" + (f"/{int(target):,}" if target else ""))
    if prog.get("steps_per_s"):
        # This measurement's samples so far over its wall time, the baselines run between
        # its repeats included: not the results table's mean ± std of the repeats.
        line.append(f"  {float(prog['steps_per_s']):,.0f} steps/s overall")
    if prog.get("env"):
        line.append(f"  [{prog['env']}]", style="dim")
    return line


class Ui:
    """Status display + a place for the head's output, safe to use from a reader thread."""

    def __init__(self, console: Console | None = None, quiet: bool = False) -> None:
        self.console = console or Console(stderr=True, highlight=False)
        self.out = Console(file=sys.stdout, highlight=False, soft_wrap=True)
        self.quiet = quiet
        self._live: Live | None = None
        self._last_plain = ""

    def __enter__(self) -> Ui:
        if self.console.is_terminal and not self.quiet:
            self._live = Live(Text(""), console=self.console, refresh_per_second=4, transient=True)
            self._live.__enter__()
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._live is not None:
            self._live.__exit__(et, e, tb)
            self._live = None

    def echo(self, line: str) -> None:
        # Through the Live console when active, so output and status line don't tangle.
        if self._live is not None:
            self._live.console.print(Text(line))
        else:
            print(line, flush=True)

    def info(self, msg: str | Text) -> None:
        """A line for the user: a ``str`` is shown as it is, never read as rich markup --
        it may carry a node's words (``done.message``, a store's error), where ``[/x]``
        would raise and ``[link=…]`` would be obeyed.  Style with a :class:`Text`."""
        if not self.quiet:
            self.console.print(Text(msg) if isinstance(msg, str) else msg)

    def status(
        self, cluster_id: str, st: StatusRecord | None, phase_hint: str = "starting"
    ) -> None:
        text = _fmt_status(cluster_id, st, phase_hint)
        if self._live is not None:
            self._live.update(text)
        elif not self.quiet:
            # Without a terminal, print only changes of phase or node count.
            key = (
                f"{st.phase}:{len(st.nodes_joined)}:{st.groups}:{st.nodes_lost}:"
                f"{[n.rank for n in st.interrupted]}"
                if st
                else phase_hint
            )
            if key != self._last_plain:
                self._last_plain = key
                self.console.print(text)
