"""The one place a launcher process asks Slurm about its jobs.

Sites rate-limit RPCs per user, and a launcher (``deploy``, ``up``'s watcher, ``down``)
may follow a cluster of many jobs (node groups, grown nodes, replacements) for days.
Every question about any of them goes through :class:`JobQueue`, which answers from
one batched query naming all of them (:func:`commands.query_jobs`: one ``squeue``,
``sacct`` only for jobs that left the queue), asked:

* never twice within ``MIN_INTERVAL_S`` (a cached answer until then);
* less often while nothing changes: the interval grows by ``BACKOFF`` per unchanged
  answer up to ``MAX_INTERVAL_S`` -- a job that waits in the queue or runs for hours
  is asked about twice a minute;
* at the shortest interval again when something changed, or when the caller expects a
  change (:meth:`JobQueue.hurry`: the workload said it is done, ``down`` asked the head
  to stop), until the change is seen.

A job that ended is never asked about again.  One queue per process (:func:`jobs`):
two targets in one process share its limit.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_delay,
    wait_exponential_jitter,
)

from syndeo.launcher.targets.slurm import commands

MIN_INTERVAL_S = 2.0
MAX_INTERVAL_S = 30.0
BACKOFF = 1.5


class JobQueue:
    """Cached, rate-limited, batched answers about this process's Slurm jobs."""

    def __init__(
        self,
        min_s: float = MIN_INTERVAL_S,
        max_s: float = MAX_INTERVAL_S,
        query: Callable[[list[str]], dict[str, commands.JobInfo]] | None = None,
    ) -> None:
        self.min_s, self.max_s = min_s, max_s
        self.interval = min_s
        self._query = query or commands.query_jobs
        self._ids: dict[str, None] = {}  # every job asked about, in order (a set that keeps it)
        self._known: dict[str, commands.JobInfo] = {}
        self._asked_at = -float("inf")
        self._hurry = False

    def watch(self, *job_ids: str) -> None:
        """Name jobs the next query covers (every job of the cluster, asked about or not)."""
        self._ids.update(dict.fromkeys(str(j) for j in job_ids))

    def hurry(self) -> None:
        """A change is expected soon: ask at the shortest interval until one is seen."""
        self._hurry = True
        self.interval = self.min_s

    def info(
        self,
        job_id: str,
        deadline_s: float = commands.QUERY_DEADLINE_S,
        on_retry: Callable[[str], None] | None = None,
    ) -> commands.JobInfo:
        """The job's state as of the last query, querying all jobs again when that answer
        is older than the interval.  A controller that does not answer is retried for up
        to ``deadline_s``, then :class:`commands.SlurmUnreachable` is raised: the caller
        decides what not knowing means (never that the job should be cancelled)."""
        job_id = str(job_id)
        self.watch(job_id)
        known = self._known.get(job_id)
        if known is None or not (known.finished or self._fresh()):
            self._refresh(deadline_s, on_retry)
        return self._known[job_id]

    def _fresh(self) -> bool:
        return time.monotonic() - self._asked_at < self.interval

    def _refresh(self, deadline_s: float, on_retry: Callable[[str], None] | None) -> None:
        # The limit holds even for a job never asked about (a new one; `stop`'s jobs).
        wait = self._asked_at + self.min_s - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        ids = [j for j in self._ids if not (j in self._known and self._known[j].finished)]

        def said(state: RetryCallState) -> None:
            if on_retry is not None and state.outcome is not None:
                on_retry(f"{state.outcome.exception()}; retrying for up to {deadline_s:.0f} s")

        retrying = Retrying(
            retry=retry_if_exception_type(commands.SlurmUnreachable),
            stop=stop_after_delay(deadline_s),
            wait=wait_exponential_jitter(initial=self.min_s, max=15),
            before_sleep=said,
            reraise=True,
        )
        try:
            answers = retrying(self._query, ids)
        finally:
            self._asked_at = time.monotonic()
        changed = any(_seen(self._known.get(j)) != _seen(a) for j, a in answers.items())
        self._known.update(answers)
        if changed:
            self._hurry = False
            self.interval = self.min_s
        elif not self._hurry:
            self.interval = min(self.interval * BACKOFF, self.max_s)


def _seen(info: commands.JobInfo | None) -> tuple[str, ...] | None:
    """What counts as a change of a job (its exit code arrives with its end state)."""
    if info is None:
        return None
    return (info.state, info.reason, str(info.restarts), info.nodes)


_QUEUE: JobQueue | None = None


def jobs() -> JobQueue:
    """This process's queue (made on first use)."""
    global _QUEUE
    if _QUEUE is None:
        _QUEUE = JobQueue()
    return _QUEUE
