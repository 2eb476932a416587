"""One error hierarchy.  Anything a user can cause or fix is a :class:`SyndeoError`.

The CLI and the invoke tasks print ``str(err)`` as one line and exit with
``err.exit_code``; tracebacks are reserved for bugs.
"""

from __future__ import annotations

from collections.abc import Callable


class SyndeoError(Exception):
    """Base class: a failure with a message a user can act on.  Its message is the one line
    the command line prints after ``syndeo: error:``."""

    exit_code: int = 2
    """The command line's exit status for it (a ``WorkloadError``: the workload's own)."""

    def __init__(self, message: str, *, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class ConfigError(SyndeoError):
    """Invalid configuration file, option or environment variable."""


class RendezvousError(SyndeoError):
    """The rendezvous location is unreachable, denied, missing or inconsistent."""


class RendezvousDenied(RendezvousError):
    """The store refused us (access denied, no or rejected credentials).  On a fresh
    machine this may pass by itself: role bindings and instance credentials can
    arrive after the machine does."""


class BlobTooLarge(RendezvousError):
    """A blob in the store is larger than its reader's limit: not read past the limit."""


class RendezvousTimeout(RendezvousError):
    """A wait on the rendezvous passed its deadline."""

    exit_code = 3


class NodeError(SyndeoError):
    """Starting, joining or supervising the Ray node failed."""


class JoinTimeout(NodeError):
    """Not all expected nodes joined before the deadline."""

    exit_code = 3


class WorkloadError(SyndeoError):
    """The workload failed; ``exit_code`` is the workload's own."""


class TargetError(SyndeoError):
    """A deployment target could not provide or reach its machines."""


def tear_down_after(cause: BaseException, stop: Callable[[], None]) -> None:
    """Run ``stop`` for a launch or run that ``cause`` ended.  A teardown that fails too
    is reported with the cause, never instead of it: one error carrying both (and the
    cause's exit code).  After an interrupt or a bug, the teardown's failure is the news."""
    try:
        stop()
    except TargetError as teardown:
        if isinstance(cause, SyndeoError):
            raise TargetError(
                f"{cause}; and the teardown failed: {teardown}", exit_code=cause.exit_code
            ) from cause
        raise


class ClusterLeftRunning(TargetError):
    """We lost sight of a cluster (its scheduler stopped answering) and left it running.

    Never a reason to cancel someone's job: the message says how to follow or stop it.
    """


class InsecurePath(SyndeoError):
    """A path another user could control (their directory, a symlink, writable by others)."""


class ImageError(SyndeoError):
    """Building, finding or opening the container image failed."""
