"""The tuning kind's log and HLO readers (kinds/xla_tuning/evidence/logread.py): exact lines,
hostile lines (fuzzed), last-wins resolution, applied-or-not with the culprit, collectives
per step."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepd.kinds.xla_tuning.catalog.catalog import Cost, Layer, Setting
from sweepd.kinds.xla_tuning.evidence.logread import (
    DCN_GBPS,
    Effective,
    applied,
    effective,
    hlo_collectives,
    hlo_evidence,
    parse_flags,
    unknown_flags,
    unknown_flags_in,
)
from sweepd.kinds.xla_tuning.sim.hlo import hlo_text
from tests.golden_files import GOLDEN, check_golden_cases

AG = "xla_gpu_all_gather_combine_threshold_bytes"
IMAGE = f"--{AG}=8589934592 --xla_gpu_enable_latency_hiding_scheduler=True"


def test_parse_flags_last_wins_and_bare_flags() -> None:
    flags = parse_flags(f"{IMAGE} --{AG}=1073741824 --xla_dump_hlo_as_text junk -- --=x")
    assert flags[AG] == "1073741824"
    assert flags["xla_dump_hlo_as_text"] == "true"
    assert list(flags)[-2:] == [AG, "xla_dump_hlo_as_text"]   # a re-set flag moves last
    assert "" not in flags


def test_effective_resolves_last_wins_over_what_the_job_printed() -> None:
    log = [
        f"0: XLA_FLAGS={IMAGE}",
        "0: Extracted env: NCCL_PROTO=Simple",
        "0:   export NCCL_PROTO=Simple",
        f"0: [XLA dump] XLA_FLAGS={IMAGE} --xla_dump_to=/o/xla_dump",
        "1: XLA_FLAGS=--xla_other_rank=1",            # another rank: not rank 0's view
        "0: Show all environment variables:",
        "0: NCCL_NCHANNELS_PER_NET_PEER=8",
        "0: JOB_NAME=ignored",                        # not a tuning variable
        f"0: XLA_FLAGS={IMAGE} --{AG}=1073741824 --xla_dump_to=/o/xla_dump",
        "0: XLA_PYTHON_CLIENT_MEM_FRACTION=.95",
    ]
    eff = effective(log)
    assert eff.xla[AG] == "1073741824" and eff.xla["xla_dump_to"] == "/o/xla_dump"
    assert "xla_other_rank" not in eff.xla
    assert eff.env == {"NCCL_PROTO": "Simple", "NCCL_NCHANNELS_PER_NET_PEER": "8",
                       "XLA_PYTHON_CLIENT_MEM_FRACTION": ".95"}
    assert effective(log, rank=1).xla == {"xla_other_rank": "1"}
    assert effective(["MY_KEY=1", "0: MY_KEY=2"], keys=["MY_KEY"]).env == {"MY_KEY": "2"}


def test_effective_of_a_log_that_printed_nothing() -> None:
    eff = effective(["0: completed step: 1, seconds: 2.0", "garbage", ""])
    assert eff == Effective()
    ok, culprit = applied((Setting(AG, "1073741824"),), eff)
    assert not ok and culprit is not None and "never printed XLA_FLAGS" in culprit


@pytest.mark.parametrize(("line", "names"), [
    ("0: F1201 17:00:00.000000 4242 parse_flags_from_env.cc:226] Unknown flags in XLA_FLAGS: "
     "--xla_a=1 --xla_b", ("xla_a", "xla_b")),
    ("F0412 parse_flags_from_env.cc:226] Unknown flag: --xla_gpu_foo=true", ("xla_gpu_foo",)),
    ("Unknown flags in XLA_FLAGS: --xla_a=1,--xla_a=2;'--xla_c'.", ("xla_a", "xla_c")),
    ("Unknown flags in XLA_FLAGS:", ()),
    ("completed step: 3, Unknown", ()),
    ("nothing here", ()),
])
def test_unknown_flag_lines_name_the_flags(line: str, names: tuple[str, ...]) -> None:
    assert unknown_flags(line) == names


def test_unknown_flags_in_a_log_first_seen_first() -> None:
    log = ["0: Unknown flags in XLA_FLAGS: --xla_b=1 --xla_a", "1: Unknown flag: --xla_b=1"]
    assert unknown_flags_in(log) == ("xla_b", "xla_a")


def _eff(xla: str, **env: str) -> Effective:
    return Effective(parse_flags(xla), dict(env), xla)


def test_applied_when_every_setting_won() -> None:
    profile = (Setting(AG, "1073741824"), Setting("xla_gpu_enable_latency_hiding_scheduler",
                                                  "true"),
               Setting("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.95", Layer.ENV),
               Setting("num_pipeline_microbatches", "16", Layer.MAXTEXT))
    eff = _eff(f"{IMAGE} --{AG}=1073741824", XLA_PYTHON_CLIENT_MEM_FRACTION=".95")
    assert applied(profile, eff) == (True, None)   # True == true, .95 == 0.95


def test_not_applied_names_the_culprit() -> None:
    eff = _eff(f"{IMAGE} --{AG}=1073741824 --{AG}=8589934592", NCCL_PROTO="LL")
    ok, culprit = applied((Setting(AG, "1073741824"),), eff)
    assert not ok and culprit is not None
    check_golden_cases(GOLDEN / "xla_logread" / "not_applied_culprit.txt", {
        "the image's flag appended last": culprit})
    ok, culprit = applied((Setting("NCCL_PROTO", "Simple", Layer.ENV),), eff)
    assert not ok and culprit is not None and "NCCL_PROTO=LL" in culprit
    ok, culprit = applied((Setting("NCCL_BUFFSIZE", "16777216", Layer.ENV),), eff)
    assert not ok and culprit is not None and "NCCL_BUFFSIZE is not set" in culprit


def test_hlo_collectives_count_trip_counts_and_size_the_largest_buffer() -> None:
    text = "\n".join([
        "HloModule jit_train_step",
        "%body (p: (s32[], bf16[4]{0})) -> (s32[], bf16[4]{0}) {",
        "  %ag = (bf16[1,1024]{1,0}, bf16[8,1024]{1,0}) all-gather-start(bf16[1,1024]{1,0} %x),"
        " replica_groups={{0,8},{1,9}}, dimensions={0}",
        "  %ag.done = bf16[8,1024]{1,0} all-gather-done(%ag)",
        "  %rs = bf16[1,1024]{1,0} reduce-scatter(bf16[8,1024]{1,0} %y), "
        "replica_groups={{0,8}}, dimensions={0}",
        "  %ici = bf16[2,1024]{1,0} all-gather(bf16[1,1024]{1,0} %z), "
        "replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={0}",
        "}",
        "ENTRY %main (a: f32[]) -> f32[] {",
        "  %w = (s32[]) while(%t), condition=%cond, body=%body, "
        "backend_config={\"known_trip_count\":{\"n\":\"10\"}}",
        "  %cp = (f32[256]{0}, f32[256]{0}, u32[], u32[]) collective-permute-start(f32[256]{0} "
        "%q), source_target_pairs={{0,8}}",
        "  %ar = f32[64]{0} all-reduce-start(f32[64]{0} %r), replica_groups={}",
        "  %a2a = bf16[16]{0} all-to-all(bf16[16]{0} %s), replica_groups={{0,8}}",
        "}",
    ])
    got = {c.cost: (c.count, c.bytes) for c in hlo_collectives(text)}
    assert got == {
        Cost.ALL_GATHER: (10, 10 * 8 * 1024 * 2),
        Cost.REDUCE_SCATTER: (10, 10 * 8 * 1024 * 2),
        Cost.ICI_COLLECTIVES: (10, 10 * 2 * 1024 * 2),
        Cost.COLLECTIVE_PERMUTE: (1, 256 * 4),
        Cost.ALL_REDUCE: (1, 64 * 4),
        Cost.ALL_TO_ALL: (1, 16 * 2),
    }


def test_hlo_evidence_reads_back_the_simulated_shares() -> None:
    shares = {Cost.COLLECTIVE_PERMUTE: 0.30, Cost.BUBBLE: 0.22, Cost.COMPUTE: 0.40,
              Cost.ALL_GATHER: 0.08}
    ev = dict(hlo_evidence(hlo_text(shares, 30.0, nodes=8, layers=61), 30.0).shares)
    assert ev[Cost.COLLECTIVE_PERMUTE] == pytest.approx(0.30, abs=0.002)
    assert ev[Cost.ALL_GATHER] == pytest.approx(0.08, abs=0.002)
    assert ev[Cost.COMPUTE] == pytest.approx(0.62, abs=0.003)   # the bubble is idle: compute
    no_step = dict(hlo_evidence(hlo_text(shares, 30.0, nodes=8, layers=61)).shares)
    assert no_step[Cost.COLLECTIVE_PERMUTE] == pytest.approx(0.30 / 0.38, abs=0.003)
    assert Cost.COMPUTE not in no_step


def test_hlo_evidence_of_text_without_collectives() -> None:
    assert hlo_evidence("HloModule m\nENTRY %e () -> f32[] {\n}\n", 10.0).shares == (
        (Cost.COMPUTE, 1.0),)
    assert hlo_evidence("", None).shares == ()
    # Collectives longer than the step: shares of the collectives, nothing left for compute.
    big = f"  %a = f32[{int(DCN_GBPS * 1e9)}]{{0}} all-to-all(f32[1]{{0}} %x)"
    assert dict(hlo_evidence(big, 1.0).shares) == {Cost.ALL_TO_ALL: 1.0, Cost.COMPUTE: 0.0}


_lines = st.text(st.characters(codec="utf-8"), max_size=300) | st.builds(
    lambda a, b, c: a + b + c, st.sampled_from(["", "0: ", "12: ", "  export ", "[x] "]),
    st.sampled_from(["XLA_FLAGS=", "NCCL_PROTO=", "Unknown flags in XLA_FLAGS: ",
                     "Unknown flag: ", "  %a = bf16[", " all-gather-start(", "while(",
                     "replica_groups={{", "known_trip_count\":{\"n\":\""]),
    st.text(max_size=200))


@settings(max_examples=300, deadline=None)
@given(st.lists(_lines, max_size=30))
def test_hostile_lines_never_raise(lines: list[str]) -> None:
    eff = effective(lines)
    assert isinstance(eff.xla, dict) and all(isinstance(v, str) for v in eff.env.values())
    for line in lines:
        assert all(n and " " not in n for n in unknown_flags(line))
    ev = hlo_evidence("\n".join(lines), 10.0)
    assert all(0.0 <= share <= 1.0 for _, share in ev.shares)
    applied((Setting(AG, "1"), Setting("NCCL_PROTO", "Simple", Layer.ENV)), eff)


def test_huge_and_degenerate_shapes_stay_bounded() -> None:
    line = "  %a = bf16[" + ",".join(["99999999999999"] * 20) + "]{0} all-gather(bf16[1]{0} %x)"
    assert hlo_collectives(line)[0].bytes == 2   # too many dims: not a shape, the operand is
    trip = ("  %w = () while(%t), body=%b, backend_config={\"known_trip_count\":{\"n\":\""
            + "9" * 40 + "\"}}\n%b (p: ()) -> () {\n  %r = f32[1]{0} all-reduce(f32[1]{0} %p)\n}")
    assert hlo_collectives(trip)[0].count == 1_000_000
