"""Property tests: the batch search is total on any runs it is shown, hostile memory lines
included, and never proposes a value it must not run."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sweepd.kinds.model_perf.search import Outcome, Probe, batch_space, next_probe

gb = st.none() | st.floats(min_value=-1e6, max_value=1e6, allow_nan=False) | st.sampled_from(
    [0.0, 1e-300, float("inf")])
probe = st.builds(
    Probe,
    value=st.integers(min_value=1, max_value=300),
    outcome=st.sampled_from(Outcome),
    tgs=st.none() | st.floats(min_value=0, max_value=1e5, allow_nan=False),
    temp_gb=gb, fixed_gb=gb, limit_gb=gb, alloc_gb=gb,
)


@settings(max_examples=400, deadline=None)
@given(st.lists(probe, max_size=8, unique_by=lambda p: p.value),
       st.integers(min_value=1, max_value=500), st.integers(min_value=1, max_value=400))
def test_next_probe_is_total_and_never_runs_a_known_failure_or_a_repeat(
        probes: list[Probe], estimate: int, upper: int) -> None:
    space = batch_space(estimate, 1, upper)
    step = next_probe(space, probes)
    if step is None:
        return
    assert step.value in space.candidates and step.why
    assert step.value not in {p.value for p in probes}
    # Every failure above the highest pass bounds the search; one below a pass contradicts
    # it and bounds nothing below the pass (issue 22), but is never run again (above).
    top = max((int(p.value) for p in probes if p.outcome is Outcome.OK), default=0)
    failed = [p.value for p in probes if p.outcome is not Outcome.OK and int(p.value) > top]
    assert all(int(step.value) < int(f) for f in failed)
