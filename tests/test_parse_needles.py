"""The parser's one-search needle check (`parse._ANY_NEEDLE`, a prefix tree of the signature
needles) says what testing each needle says: a line that holds a needle is still searched
for its signature, and one that holds none is still passed over."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from sweepd.monitor.parse import _ANY_NEEDLE, _NEEDLES, _trie_pattern

FIXTURES = Path(__file__).parent / "fixtures"


def _each(line: str) -> bool:
    return any(needle in line for needle in _NEEDLES)


def _one(line: str) -> bool:
    return _ANY_NEEDLE.search(line) is not None


def test_every_needle_is_found_anywhere_in_a_line() -> None:
    for needle in _NEEDLES:
        assert _one(needle) and _one(f"x {needle}") and _one(f"{needle} y"), needle
        assert _one(f"{needle[:-1]}{needle}"), needle   # a false start just before it
        assert not _one(needle[:-1]) or _each(needle[:-1]), needle


def test_a_word_and_its_extension_are_both_found() -> None:
    found = re.compile(_trie_pattern({"ab", "abc", "b"}))
    assert [bool(found.fullmatch(w)) for w in ("ab", "abc", "b", "a", "ac", "bc")] == [
        True, True, True, False, False, False]


def test_the_real_logs_read_the_same() -> None:
    lines: list[str] = []
    for path in sorted(FIXTURES.rglob("*.log")):
        lines += path.read_text("utf-8", errors="replace").lower().splitlines()
    for path in sorted(FIXTURES.rglob("*.log.gz")):
        lines += gzip.decompress(path.read_bytes()).decode("utf-8", "replace").lower().splitlines()
    assert len(lines) > 1000
    assert [_one(line) for line in lines] == [_each(line) for line in lines]
    assert any(_each(line) for line in lines)


# Text built from the needles' own pieces: near misses, overlaps and whole needles.
_PIECES = st.sampled_from(sorted({n[i:j] for n in _NEEDLES for i in range(0, len(n), 3)
                                  for j in (i + 2, i + 5, len(n))} | set(_NEEDLES)))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(_PIECES, st.text(max_size=3)), max_size=8))
def test_any_text_reads_the_same(parts: list[str]) -> None:
    line = "".join(parts).lower()
    assert _one(line) == _each(line)
