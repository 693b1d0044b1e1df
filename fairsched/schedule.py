"""Schedule: the sets selected in rounds ``1..T``, stored compactly.

Rounds are stored in compressed-row form (``indptr``, ``indices``), so a schedule costs
``O(T + Σ_t |S_t|)`` memory whatever ``n`` is. The file format is CSV with a header
``round,workers`` and one row per round: the 1-based round and the selected worker ids
separated by spaces (the field CSV-quoted when an id holds ``"`` or ``,``).
"""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from fairsched.atomic import atomic_write
from fairsched.errors import InstanceError

HEADER = ("round", "workers")


@dataclass(frozen=True, eq=False)
class Schedule:
    """Selected sets of ``rounds`` consecutive rounds over ``n`` workers.

    ``indices[indptr[t]:indptr[t + 1]]`` are the (sorted) workers selected in round ``t + 1``.
    """

    n: int
    indptr: np.ndarray
    indices: np.ndarray
    policy: str = ""
    seed: int | None = None

    @property
    def rounds(self) -> int:
        """Number of rounds ``T``."""
        return int(self.indptr.size - 1)

    def __len__(self) -> int:
        return self.rounds

    def selected(self, t: int) -> np.ndarray:
        """The set of round ``t + 1`` (0-based ``t``) as sorted indices."""
        return self.indices[self.indptr[t]:self.indptr[t + 1]]

    def __iter__(self) -> Iterator[np.ndarray]:
        for t in range(self.rounds):
            yield self.selected(t)

    def sizes(self) -> np.ndarray:
        """``|S_t|`` for every round."""
        return np.diff(self.indptr)

    def masks(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Boolean ``(stop − start, n)`` membership matrix of rounds ``start..stop−1`` (0-based)."""
        stop = self.rounds if stop is None else min(stop, self.rounds)
        lo, hi = self.indptr[start], self.indptr[stop]
        out = np.zeros((stop - start, self.n), dtype=bool)
        rows = np.repeat(np.arange(stop - start), np.diff(self.indptr[start:stop + 1]))
        out[rows, self.indices[lo:hi]] = True
        return out

    def counts(self) -> np.ndarray:
        """``N_u(T)``: how often each worker was selected."""
        return np.bincount(self.indices, minlength=self.n)

    @classmethod
    def from_sets(cls, sets: Sequence[Sequence[int]], n: int, policy: str = "", seed: int | None = None) -> "Schedule":
        """Build a schedule from a list of index sets."""
        arrays = [np.unique(np.asarray(s, dtype=np.int64)) for s in sets]
        indptr = np.zeros(len(arrays) + 1, dtype=np.int64)
        np.cumsum([a.size for a in arrays], out=indptr[1:])
        indices = np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)
        return cls(n, indptr, indices, policy, seed)

    def write(self, path: str | os.PathLike[str], ids: Sequence[str]) -> None:
        """Write the schedule as CSV (``round,workers``) atomically.

        The csv module quotes a field only when it must (an id with ``"`` or ``,``), so
        ordinary ids give plain ``1,u1 u2`` rows and any valid id reads back.
        """
        if len(ids) != self.n:
            raise ValueError(f"{len(ids)} ids for {self.n} workers")
        names = np.asarray(ids, dtype=object)
        with atomic_write(path) as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow(HEADER)
            writer.writerows((t + 1, " ".join(names[self.selected(t)])) for t in range(self.rounds))

    @classmethod
    def read(cls, path: str | os.PathLike[str], ids: Sequence[str]) -> "Schedule":
        """Read a schedule written by :meth:`write`; worker ids are resolved against ``ids``.

        A file that is not UTF-8 CSV of that shape is an :class:`InstanceError` naming the
        file and the line; an unreadable one an ``OSError``.
        """
        with open(path, "rb") as handle:
            data = handle.read()
        return cls.parse(data, ids, source=os.fspath(path))

    @classmethod
    def parse(cls, data: bytes, ids: Sequence[str], source: str = "<schedule>") -> "Schedule":
        """The schedule in ``data`` (the bytes of a :meth:`write` file); ``source`` names it in errors."""
        position = {name: i for i, name in enumerate(ids)}
        reader = csv.reader(io.StringIO(_text(data, source), newline=""), strict=True)
        sets: list[list[int]] = []
        try:
            header = next(reader, None)
            if header != list(HEADER):
                raise InstanceError(f"line 1: expected header 'round,workers', got {header!r}", source=source)
            for row in reader:
                if len(row) != 2 or row[0] != str(len(sets) + 1):
                    raise InstanceError(f"line {reader.line_num}: expected '{len(sets) + 1},<ids>', got {row!r}",
                                        source=source)
                try:
                    sets.append([position[w] for w in row[1].split()])
                except KeyError as missing:
                    raise InstanceError(f"line {reader.line_num}: unknown worker id {missing}", source=source) from None
        except csv.Error as exc:
            raise InstanceError(f"line {reader.line_num}: malformed CSV ({exc})", source=source) from None
        return cls.from_sets(sets, len(ids))


def _text(data: bytes, source: str) -> str:
    """``data`` decoded as UTF-8; an :class:`InstanceError` naming the line of the first bad or NUL byte."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InstanceError(f"line {line}: not UTF-8 text (byte {data[exc.start]:#04x})", source=source) from None
    nul = text.find("\x00")
    if nul >= 0:
        line = text.count("\n", 0, nul) + 1
        raise InstanceError(f"line {line}: contains a NUL byte", source=source)
    return text
