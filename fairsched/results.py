"""The base of every result object fairsched returns (``status``, ``success``, ``message``,
``seconds``); see :mod:`fairsched.solvers.result`, where it is defined so that the
math-programming layer shares it."""

from fairsched.solvers.result import Result

__all__ = ["Result"]
