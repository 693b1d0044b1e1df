"""A utility the policy cannot see: what an online policy is given in place of ``f``."""

from __future__ import annotations

from typing import Any

import numpy as np

from fairsched.errors import FairschedError
from fairsched.utilities.base import SetFunction


class HiddenUtility(SetFunction):
    """A placeholder on ``n`` workers whose every evaluation raises: the problem a learning
    policy runs on carries this, so any use of the true ``f`` by the policy is an error."""

    kind = "hidden"

    def __init__(self, n: int) -> None:
        self.n = int(n)

    @property
    def submodular(self) -> bool | None:
        return None

    def values(self, masks: np.ndarray) -> np.ndarray:
        raise FairschedError("the utility is hidden from the policy: it must plan with what it learned")

    def to_config(self) -> dict[str, Any]:
        return {"kind": self.kind, "n": self.n}
