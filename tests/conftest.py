from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INSTANCES = ROOT / "instances"


@pytest.fixture
def paper_path() -> Path:
    return INSTANCES / "paper.toml"


def bundled_instances() -> list[Path]:
    return sorted(INSTANCES.glob("*.toml"))
