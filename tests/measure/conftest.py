from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl-logs"


@pytest.fixture
def logs_dir() -> Path:
    return DATA
