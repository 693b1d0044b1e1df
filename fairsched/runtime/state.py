"""Saved states: the versioned JSON documents of schedulers and runs, and their checks.

Every state names its ``format`` and ``version``; a state belongs to one problem, named by
the SHA-256 :func:`problem_fingerprint` of its instance table.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from fairsched.errors import CheckpointError
from fairsched.instances import problem_to_table
from fairsched.problem import Problem

#: 2: one engine state for schedulers and runs (fairsched 0.2); version 1 states are refused
STATE_VERSION = 2


def problem_fingerprint(problem: Problem) -> str:
    """SHA-256 of the problem's instance table (utility, k, r, ids): a state belongs to one problem."""
    try:
        table = problem_to_table(problem)
    except TypeError:  # a utility that cannot be written out (e.g. a lambda): use what is known
        table = {"k": problem.k, "r": problem.r.tolist(), "ids": list(problem.ids),
                 "utility": problem.utility.kind}
    table.pop("name", None)
    table.pop("rounds", None)
    return hashlib.sha256(json.dumps(table, sort_keys=True).encode()).hexdigest()


def read_state(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Parse a JSON state file; unreadable or truncated files are a :class:`CheckpointError`."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no such checkpoint") from None
    except (json.JSONDecodeError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise CheckpointError(f"{path}: not a readable checkpoint (corrupted or truncated: {exc})") from None
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def check_state_header(state: Any, expected_format: str, version: int = STATE_VERSION) -> None:
    """Refuse a document that is not ``expected_format`` at ``version`` (default :data:`STATE_VERSION`)."""
    if not isinstance(state, dict) or state.get("format") != expected_format:
        found = state.get("format") if isinstance(state, dict) else type(state).__name__
        raise CheckpointError(f"not a {expected_format} document (format {found!r})")
    if state.get("version") != version:
        raise CheckpointError(f"{expected_format} version {state.get('version')!r} is not supported "
                              f"(this fairsched reads version {version})")
