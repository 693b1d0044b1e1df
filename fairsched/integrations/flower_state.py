"""What fairsched's Flower strategy writes to disk: the checkpoint and the round history.

Checkpoint
----------
One file, rewritten atomically after every round (:func:`fairsched.atomic.atomic_write`:
a temporary sibling, ``fsync``, rename), so a ServerApp killed at any instant leaves the
previous round's complete checkpoint. It is a zip archive (stored, not compressed) of

- ``state.json``: ``format`` (:data:`CHECKPOINT_FORMAT`), ``version``, the last completed
  ``server_round``, the scheduler's state (its versioned JSON document, random generator
  included), the strategy's options, the node back-off states, the byte length of the
  history file after that round, and the keys of the global model;
- ``counts.npy`` (``present``, ``asked``, ``used``, ``absent`` per worker), ``weight.npy``
  and ``sizes.npy`` (the aggregation weight summed over the run and the last reported
  ``num-examples``), ``directory_nodes.npy`` / ``directory_workers.npy`` (the node
  directory, in resolution order);
- ``model/<i>.npy``: the global model after that round, one array per ArrayRecord key.

Every member carries a CRC-32 that :func:`read_checkpoint` checks, so a damaged or
truncated file is a :class:`~fairsched.errors.CheckpointError`, never a silent resume.

History
-------
JSON lines, appended (one line per round) and flushed, never rewritten: a ``header`` line
(the problem and options), then ``round`` lines, ``resume`` lines where a restarted
ServerApp took over, and a ``summary`` line at the end of a run. To stay small at large
``n``, a round line lists the connected nodes, the available workers and the departed
workers in full only after a header or a resume line, and otherwise as changes from the
previous round (``*_added`` / ``*_removed``); :func:`read_history` rebuilds the full lists.
On resume the file is first cut back to the length the checkpoint recorded, so it holds
each round once.
"""

from __future__ import annotations

import io
import json
import math
import os
import zipfile
from collections.abc import Iterator, Mapping
from typing import IO, Any

import numpy as np
from flwr.app import Array, ArrayRecord

from fairsched.atomic import atomic_write
from fairsched.errors import CheckpointError

__all__ = ["CHECKPOINT_FORMAT", "CHECKPOINT_VERSION", "HISTORY_FORMAT", "HISTORY_VERSION", "HistoryWriter",
           "read_checkpoint", "read_history", "write_checkpoint"]

CHECKPOINT_FORMAT = "fairsched-flower-checkpoint"
CHECKPOINT_VERSION = 1
HISTORY_FORMAT = "fairsched-flower-history"
HISTORY_VERSION = 2
_DIFFED = ("connected_nodes", "available", "departed")


# -------------------------------------------------------------------------------------------
# checkpoint
# -------------------------------------------------------------------------------------------
def _write_npy(archive: zipfile.ZipFile, name: str, array: np.ndarray) -> None:
    with archive.open(name, "w", force_zip64=True) as member:
        np.lib.format.write_array(member, np.ascontiguousarray(array), allow_pickle=False)


def write_checkpoint(path: str | os.PathLike[str], state: Mapping[str, Any], arrays: Mapping[str, np.ndarray],
                     model: ArrayRecord | None) -> None:
    """Write ``state`` (JSON), ``arrays`` and the global ``model`` to ``path`` atomically."""
    keys = [] if model is None else list(model.keys())
    document = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, **state, "model_keys": keys,
                "has_model": model is not None}
    with atomic_write(path, "wb") as handle, zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr("state.json", json.dumps(document, default=_json_default))
        for name, array in arrays.items():
            _write_npy(archive, f"{name}.npy", array)
        if model is not None:
            for i, key in enumerate(keys):
                _write_npy(archive, f"model/{i}.npy", model[key].numpy())


def read_checkpoint(path: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, np.ndarray], ArrayRecord | None]:
    """``(state, arrays, model)`` from a checkpoint; a damaged file is a :class:`CheckpointError`."""
    # imported here: the ClientApp side imports this module and must not load the runtime
    from fairsched.runtime.state import check_state_header

    try:
        with zipfile.ZipFile(path) as archive:
            state = json.loads(archive.read("state.json"))
            try:
                check_state_header(state, CHECKPOINT_FORMAT, CHECKPOINT_VERSION)
            except CheckpointError as exc:
                raise CheckpointError(f"{path}: {exc}") from None
            arrays: dict[str, np.ndarray] = {}
            for name in archive.namelist():
                if name.endswith(".npy") and not name.startswith("model/"):
                    with archive.open(name) as member:
                        arrays[name[:-4]] = np.lib.format.read_array(io.BytesIO(member.read()), allow_pickle=False)
            model = None
            if state.get("has_model"):
                model = ArrayRecord()
                for i, key in enumerate(state["model_keys"]):
                    with archive.open(f"model/{i}.npy") as member:
                        model[key] = Array(np.lib.format.read_array(io.BytesIO(member.read()), allow_pickle=False))
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no such checkpoint") from None
    except CheckpointError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, KeyError, ValueError, EOFError, OSError) as exc:
        raise CheckpointError(f"{path}: not a readable checkpoint (damaged or truncated: {exc})") from None
    return state, arrays, model


# -------------------------------------------------------------------------------------------
# history
# -------------------------------------------------------------------------------------------
def _json_default(value: Any) -> Any:
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


class HistoryWriter:
    """Append JSON lines to ``path``: a header on a fresh file, or continue at ``offset`` on resume."""

    def __init__(self, path: str | os.PathLike[str], header: Mapping[str, Any], offset: int | None = None) -> None:
        self.path = os.fspath(path)
        self._handle: IO[bytes]
        if offset is not None and os.path.exists(self.path) and os.path.getsize(self.path) >= offset > 0:
            self._handle = open(self.path, "r+b")  # noqa: SIM115 - kept open for the run's appends
            self._handle.truncate(offset)
            self._handle.seek(offset)
            self.continued = True
        else:
            self._handle = open(self.path, "wb")  # noqa: SIM115 - kept open for the run's appends
            self.continued = False
            self.append({"type": "header", "format": HISTORY_FORMAT, "version": HISTORY_VERSION, **header})

    def append(self, entry: Mapping[str, Any]) -> int:
        """Write one line and flush it; returns the file's length after it."""
        self._handle.write(json.dumps(entry, default=_json_default, separators=(",", ":")).encode() + b"\n")
        self._handle.flush()
        return self._handle.tell()

    @property
    def offset(self) -> int:
        return self._handle.tell()

    def close(self) -> None:
        self._handle.close()


def _lines(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    with open(path, "rb") as handle:
        for raw in handle:
            if not raw.endswith(b"\n"):
                return  # a line still being written (or cut by a crash) is not a record
            try:
                yield json.loads(raw)
            except ValueError:
                return


def read_history(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The history at ``path``: ``header``, ``rounds`` (full lists rebuilt), ``resumes`` and ``summary``.

    Every round comes back with ``connected_nodes``, ``available`` and ``departed`` as full
    lists, whether the line stored them in full or as changes. A trailing incomplete line
    (a run still writing, or killed mid-line) is ignored.
    """
    out: dict[str, Any] = {"header": None, "rounds": [], "resumes": [], "summary": None}
    current: dict[str, list[Any]] = {}
    for line in _lines(path):
        kind = line.get("type")
        if kind == "header":
            out["header"], current = line, {}
        elif kind == "resume":
            out["resumes"].append(line)
            current = {}
        elif kind == "summary":
            out["summary"] = line
        elif kind == "round":
            entry = dict(line)
            for key in _DIFFED:
                if key in entry:
                    current[key] = list(entry[key])
                else:
                    removed = set(entry.pop(f"{key}_removed", ()))
                    kept = [x for x in current.get(key, []) if x not in removed]
                    entry[key] = current[key] = kept + list(entry.pop(f"{key}_added", ()))
            out["rounds"].append(entry)
    return out
