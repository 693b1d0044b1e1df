"""The fields every result object carries, in the manner of ``scipy.optimize.OptimizeResult``.

``status``
    A short machine-readable word for how the computation ended (``"optimal"``,
    ``"time-limit"``, ``"feasible"``, ...); each result documents its values.
``success``
    Whether it ended as asked (an optimum proven, a fit converged, a check completed); a
    result with ``success`` false may still carry usable numbers (bounds at a time limit).
``message``
    One human-readable sentence.
``seconds``
    Wall-clock time of the computation.

The same names mean the same things in every result fairsched returns; results of
``fairsched`` itself use this class through :mod:`fairsched.results`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Result:
    """Base of every result object: ``status``, ``success``, ``message``, ``seconds``."""

    status: str = "ok"
    success: bool = True
    message: str = ""
    seconds: float = 0.0

    def _settle(self, status: str, success: bool, message: str) -> None:
        """For a subclass's ``__post_init__``: the ``status`` and ``success`` it ends with unless
        the caller gave a status, and its ``message`` unless the caller gave one."""
        if self.status == "ok":
            object.__setattr__(self, "status", status)
            object.__setattr__(self, "success", success)
        if not self.message:
            object.__setattr__(self, "message", message)
