"""The example specs a new user copies from must be accepted as they are."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweepd.kinds.registry import kinds, load_spec_file

EXAMPLES = Path(__file__).parent.parent / "examples"


def test_there_is_an_example_of_every_kind() -> None:
    assert {p.stem for p in EXAMPLES.glob("*.yaml")} == set(kinds())


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_an_example_is_a_valid_spec_of_its_kind(path: Path) -> None:
    assert load_spec_file(path).kind == path.stem
