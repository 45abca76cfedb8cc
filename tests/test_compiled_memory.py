"""The compiled-memory line: parsed exactly when whole, never crashed on nor mis-read."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from sweepd.monitor.facts import CompiledMemoryFact
from sweepd.monitor.parse import parse_line
from sweepd.sim.logfmt import compiled_memory_line

LINE = ("Total memory size: 253.0 GB, Output size: 0.4 GB, Temp size: 178.0 GB, "
        "Argument size: 75.4 GB, Host temp size: 0.0 GB.")
SETTINGS = settings(max_examples=300, deadline=None)


def test_the_facts_file_line_parses() -> None:
    fact = parse_line("0: " + LINE)
    assert fact == CompiledMemoryFact(rank=0, total_gb=253.0, output_gb=0.4, temp_gb=178.0,
                                      argument_gb=75.4, host_temp_gb=0.0)


def test_a_line_whose_parts_exceed_its_total_is_not_a_measurement() -> None:
    assert parse_line(LINE.replace("Temp size: 178.0", "Temp size: 378.0")) is None


gb = st.floats(min_value=0, max_value=9999, allow_nan=False).map(lambda v: round(v, 1))


@SETTINGS
@given(gb, gb, gb, gb, st.none() | st.integers(min_value=0, max_value=4096))
def test_every_printed_line_round_trips(output: float, temp: float, argument: float,
                                        host: float, rank: int | None) -> None:
    line = compiled_memory_line(output, temp, argument, host)
    fact = parse_line(line if rank is None else f"{rank}: {line}")
    assert isinstance(fact, CompiledMemoryFact)
    assert (fact.rank, fact.output_gb, fact.temp_gb, fact.argument_gb, fact.host_temp_gb) == \
        (rank, output, temp, argument, host)
    assert math.isclose(fact.total_gb, round(output + temp + argument, 1), abs_tol=0.051)


@SETTINGS
@given(st.integers(min_value=0, max_value=len(LINE) - 2),
       st.text(alphabet=st.characters(blacklist_characters="0123456789."), min_size=1,
               max_size=6))
def test_a_cut_or_spliced_line_is_never_half_read(at: int, junk: str) -> None:
    """Damage that does not itself spell a number (a digit spliced into one makes another
    well-formed line) either leaves every number as printed or yields no memory fact."""
    for line in (LINE[:at], LINE[at:], LINE[:at] + junk + LINE[at:]):
        fact = parse_line(line)
        if isinstance(fact, CompiledMemoryFact):
            assert (fact.total_gb, fact.temp_gb, fact.argument_gb) == (253.0, 178.0, 75.4)


HOSTILE = [
    LINE.replace("178.0", "nan"), LINE.replace("178.0", "inf"), LINE.replace("178.0", "-1.0"),
    LINE.replace("178.0", "1e308"), LINE.replace("178.0", "9" * 400),
    LINE.replace(" GB,", " GiB,"), LINE.replace("Temp size", "Tmp size"),
    "Total memory size: " * 50, "Total memory size: 1 GB" + ", Output size: 1 GB" * 40,
]


def test_hostile_lines_yield_no_memory_fact() -> None:
    for line in HOSTILE:
        assert not isinstance(parse_line(line), CompiledMemoryFact), line


@SETTINGS
@given(st.text(max_size=300))
def test_any_text_after_the_key_never_raises(tail: str) -> None:
    fact = parse_line("Total memory size: " + tail)
    if isinstance(fact, CompiledMemoryFact):
        assert all(math.isfinite(v) and v >= 0 for v in
                   (fact.total_gb, fact.output_gb, fact.temp_gb, fact.argument_gb,
                    fact.host_temp_gb))


def test_digits_of_other_scripts_are_not_numbers_here() -> None:
    assert parse_line(LINE.replace("178.0", "\u0661\u0667\u0668.0")) is None
