from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "vllm-0.32.0-cpu"


@pytest.fixture
def fixtures_dir() -> Path:
    """Recorded vLLM 0.32 output, part of the repository (tests/fixtures/README.md): never skipped."""
    return FIXTURES
