"""Oort's per-worker statistical utility, learned from reported losses, and Oort-like selection.

Lai, Zhu, Madhyastha and Chowdhury, "Oort: Efficient Federated Learning via Guided Participant
Selection" (OSDI 2021), §4: worker ``u``'s statistical utility is
``|B_u|·sqrt((1/|B_u|) Σ_{k∈B_u} loss(k)²)``, from the size ``|B_u|`` of its data and the
root-mean-square loss it reported the last time it trained; a worker not heard from for a
while gets the staleness bonus ``sqrt(0.1·log t / t_u)`` (``t_u`` the round it last
trained), and a worker never heard from is explored first. Oort selects by this utility with
an ``ε`` share of the slots explored, and keeps no floors.

:class:`OortLearner` keeps the utilities (the reported ``loss`` is read as the RMS loss, the
reported ``num-examples`` as ``|B_u|``); its estimate is the modular utility of the
statistical utilities, which a fair policy can plan with (Oort inside the floors).
:class:`OortPolicy` is the Oort-like baseline without floors.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from fairsched.feedback import Feedback
from fairsched.online.learner import Learner
from fairsched.policies.base import Policy, number_param
from fairsched.utilities import Modular
from fairsched.utilities.base import SetFunction

#: the weight of Oort's staleness bonus
STALENESS = 0.1


class OortLearner(Learner):
    """Per-worker statistical utility from reported losses (see the module docstring)."""

    name = "oort"

    def __init__(self, template: SetFunction) -> None:
        super().__init__(template)
        self.utility = np.full(self.n, np.nan)  # nan: never heard from
        self.last = np.zeros(self.n, dtype=np.int64)

    def _update(self, served: np.ndarray, feedback: Feedback) -> None:
        workers, loss = feedback.metric("loss")
        sized, examples = feedback.metric("num-examples")
        size = np.ones(self.n)
        size[sized] = examples
        self.utility[workers] = size[workers] * np.abs(loss)
        self.last[served] = self.rounds

    def scores(self, t: int) -> np.ndarray:
        """Statistical utility plus the staleness bonus at round ``t``; ``inf`` for the unexplored."""
        known = np.isfinite(self.utility)
        bonus = np.sqrt(STALENESS * math.log(max(t, 2)) / np.maximum(self.last, 1))
        scale = float(np.nanmean(self.utility)) if known.any() else 1.0
        return np.where(known, np.nan_to_num(self.utility) + scale * bonus, np.inf)

    def estimate(self) -> SetFunction:
        known = np.isfinite(self.utility)
        fill = float(np.nanmax(self.utility)) if known.any() else 1.0  # the unexplored: optimistic
        return Modular(np.where(known, self.utility, fill))

    def parameters(self) -> dict[str, Any]:
        return {"statistical_utility": [None if not math.isfinite(x) else float(x) for x in self.utility]}

    def _extra_state(self) -> dict[str, Any]:
        return {"utility": [None if not math.isfinite(x) else float(x) for x in self.utility],
                "last": self.last.tolist()}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self.utility = np.array([math.nan if x is None else x for x in state["utility"]], dtype=float)
        self.last = np.asarray(state["last"], dtype=np.int64)


class OortPolicy(Policy):
    """Oort-like selection without floors: the ``k − ⌈ε·k⌉`` best scores, the rest explored at random
    among the others (the unexplored first)."""

    name = "oort"
    fair: ClassVar[bool] = False

    def __init__(self, learner: OortLearner, epsilon: float = 0.1) -> None:
        super().__init__()
        self.learner = learner
        self.epsilon = number_param(self.name, "epsilon", epsilon, low=0.0, high=1.0)

    def params(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon}

    def _select(self, available: np.ndarray) -> np.ndarray:
        k = self.problem.k
        pool = np.flatnonzero(available)
        if pool.size <= k:
            return pool
        scores = self.learner.scores(self.t + 1)[pool]
        explore = math.ceil(self.epsilon * k)
        order = np.lexsort((pool, -scores))
        exploit = pool[order[: k - explore]]
        rest = pool[order[k - explore:]]
        unexplored = rest[~np.isfinite(self.learner.utility[rest])]
        if unexplored.size >= explore:
            extra = self.rng.choice(unexplored, size=explore, replace=False)
        else:
            others = np.setdiff1d(rest, unexplored)
            extra = np.concatenate([unexplored, self.rng.choice(others, size=explore - unexplored.size, replace=False)])
        return np.sort(np.concatenate([exploit, extra]).astype(np.int64))

    def learn(self, served: np.ndarray, feedback: Feedback) -> None:
        self.learner.update(served, feedback)

    def _extra_state(self) -> dict[str, Any]:
        return {"learner": self.learner.state_dict()}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self.learner.load_state_dict(state["learner"])
