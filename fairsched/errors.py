"""The error hierarchy of fairsched.

Every error a user can cause is a :class:`FairschedError`, a subclass of
:class:`ValueError`, whose message says what is wrong and where (file, key, worker id).
The command line turns them into one line on stderr: exit code 3 for
:class:`InfeasibleError`, 2 for every other one.
"""

from __future__ import annotations


class FairschedError(ValueError):
    """Base class of every error fairsched raises on bad input."""


class InstanceError(FairschedError):
    """An instance (file or in-memory parameters) is malformed.

    ``key`` names the offending entry (``"utility.sizes"``, ``"workers.r"``) and
    ``source`` the file it came from; both are optional and prefixed to the message.
    """

    def __init__(self, message: str, *, key: str | None = None, source: str | None = None):
        self.message = message
        self.key = key
        self.source = source
        super().__init__(self._render())

    def _render(self) -> str:
        prefix = ""
        if self.source:
            prefix += f"{self.source}: "
        if self.key:
            prefix += f"{self.key}: "
        return prefix + self.message

    def located(self, *, source: str | None = None, key_prefix: str | None = None) -> "InstanceError":
        """Return a copy placed in ``source`` with ``key_prefix.`` before the key."""
        key = self.key
        if key_prefix:
            key = f"{key_prefix}.{key}" if key else key_prefix
        return type(self)(self.message, key=key, source=source or self.source)


class InfeasibleError(FairschedError):
    """The fairness floors cannot be met: some ``r_u > 1`` or ``sum(r) > k``."""


class PolicyError(FairschedError):
    """Unknown policy name or invalid policy parameters."""


class TooLargeError(FairschedError):
    """A computation would exceed a configured size limit (for example the column count)."""


class CheckpointError(FairschedError):
    """A saved state is corrupted, truncated, of another version, or of another problem."""


class MissingDependencyError(FairschedError):
    """An optional dependency (an extra) is needed for what was asked and is not installed."""


class SolverFailedError(FairschedError):
    """A solver stopped without an answer (for example at a time limit too short to finish)."""
