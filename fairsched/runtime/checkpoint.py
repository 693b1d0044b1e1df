"""Run checkpoints: everything ``fairsched run --resume`` needs to continue exactly.

A checkpoint is one JSON document, written atomically: the run's arguments (with the
SHA-256 of the instance, so resuming against an edited instance is refused), the
:class:`~fairsched.runtime.simulation.Simulation` state (the engine's state, random
generators included, and the schedule so far) and a SHA-256 of both, so a checkpoint
damaged in any character is refused rather than resumed into a different run. Corrupted,
truncated, foreign-format and foreign-version files raise :class:`~fairsched.errors.CheckpointError`.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from fairsched.atomic import atomic_write
from fairsched.errors import CheckpointError
from fairsched.runtime.state import STATE_VERSION, check_state_header, read_state
from fairsched.runtime.simulation import Simulation

CHECKPOINT_FORMAT = "fairsched-run-checkpoint"


def file_sha256(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes."""
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def _digest(arguments: Any, simulation: Any) -> str:
    payload = json.dumps({"arguments": arguments, "simulation": simulation}, sort_keys=True,
                         separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


def save_checkpoint(path: str | os.PathLike[str], arguments: dict[str, Any], simulation: Simulation) -> None:
    """Write the run's ``arguments`` and ``simulation`` state to ``path`` atomically."""
    state = simulation.state_dict()
    document = {"format": CHECKPOINT_FORMAT, "version": STATE_VERSION, "arguments": arguments,
                "simulation": state, "sha256": _digest(arguments, state)}
    with atomic_write(path) as handle:
        json.dump(document, handle)


def load_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check a checkpoint; returns the document (``arguments`` and ``simulation``)."""
    document = read_state(path)
    try:
        check_state_header(document, CHECKPOINT_FORMAT)
    except CheckpointError as exc:
        raise CheckpointError(f"{path}: {exc}") from None
    if not isinstance(document.get("arguments"), dict) or not isinstance(document.get("simulation"), dict):
        raise CheckpointError(f"{path}: the checkpoint is missing its arguments or state")
    try:
        intact = document.get("sha256") == _digest(document["arguments"], document["simulation"])
    except (TypeError, ValueError):
        intact = False
    if not intact:
        raise CheckpointError(f"{path}: the checkpoint is damaged (its SHA-256 does not match its content)")
    return document


def restore(simulation: Simulation, document: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """Load the checkpoint's state into a freshly built ``simulation``."""
    try:
        simulation.load_state_dict(document["simulation"])
    except CheckpointError as exc:
        raise CheckpointError(f"{path}: {exc}") from None
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise CheckpointError(f"{path}: the checkpoint's state is malformed ({exc})") from None
