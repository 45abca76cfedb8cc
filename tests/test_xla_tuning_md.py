"""`<MODEL_TAG>-tuning.md`: the SKILL.md's ten sections, and extending it for another cell."""

from __future__ import annotations

from sweepd.kinds.xla_tuning.reporting.tuning_md import Cell, Job, Standing, extend, write
from tests.golden_files import GOLDEN, check_golden

MD = GOLDEN / "xla_tuning" / "tuning_md_unit"

HEADER = {"Date": "2026-12-01", "Model": "deepseek3-671b", "Hardware": "8 x 8 MI355, 288 GB",
          "Image": "jax-rocm:25.11", "MaxText branch": "main", "Base config":
          "configs/deepseek3-671b.gpu.yml", "Sequence length": "4096",
          "Steps": "15 (synthetic)", "Metric": "mean Tokens/s/device over steps 9-14"}


def _s(profile: str, flags: str, delta: float, job: str, base: float = 1000.0) -> Standing:
    return Standing(profile, flags, base * (1 + delta), 28.0 / (1 + delta), delta, 2, (job,))


def _fsdp() -> Cell:
    board = (_s("ag1G", "--xla_gpu_all_gather_combine_threshold_bytes=1073741824", 0.116, "101"),
             _s("nch8", "NCCL_NCHANNELS_PER_NET_PEER=8", 0.0426, "102"),
             _s("protoS", "NCCL_PROTO=Simple", -0.0134, "103"),
             _s("ovl2", "--xla_gpu_experimental_parallel_collective_overlap_limit=2", -0.0414,
                "104"))
    jobs = (Job("101", "ag1G", "sparse", "ok", 1116.0), Job("99", "baseline", "sparse", "ok",
                                                           1000.0),
            Job("105", "pag", "sparse", "oom (302.0GiB)"),
            Job("106", "bogus", "sparse", "unknown flag (xla_gpu_bogus)"))
    return Cell("deepseek3-671b", "FSDP=8", "sparse", HEADER, "env file sets nothing.",
                "No flags deployed: baseline == restore_default.", board, "ag1G",
                "all-gather fragments into 40 small collectives per step (job 100, HLO dump).",
                "proposal", "export XLA_FLAGS=\"$XLA_FLAGS "
                "--xla_gpu_all_gather_combine_threshold_bytes=1073741824\"", jobs)


def _pp() -> Cell:
    board = (_s("ovl2", "--xla_gpu_experimental_parallel_collective_overlap_limit=2", 0.0338,
                "201"),
             _s("protoS", "NCCL_PROTO=Simple", 0.0334, "202"),
             _s("nch8", "NCCL_NCHANNELS_PER_NET_PEER=8", -0.0174, "203"))
    return Cell("deepseek3-671b", "PP=8", "sparse", HEADER, "env file sets ag=1 GiB.",
                "ag 1 GiB costs PP=8 1.0 % (sparse) and 6.6 % (dense).", board, "ovl2",
                "overlap limit 2 lets two collective-permutes run at once (job 200).",
                "proposal", "export XLA_FLAGS=\"$XLA_FLAGS "
                "--xla_gpu_experimental_parallel_collective_overlap_limit=2\"",
                (Job("201", "ovl2", "sparse", "ok", 1033.8),),
                guard='[[ "${MAXTEXT_DCN_PP:-1}" -gt 1 ]]')


SECTIONS = ["## TL;DR", "## Inventory", "## Effect of deepseek3-671b.env.sh on",
            "## Tuning leaderboard", "## Why the winning flag wins", "## Negative findings",
            "## Recommended deployment", "## Appendix: data sources"]


def test_a_new_file_has_the_header_and_the_sections_but_no_sign_flips() -> None:
    text = write(_fsdp())
    # The whole file: the title and header, the leaderboard (ag1G first), the negative
    # findings (ovl2's delta, pag's OOM), the appendix's jobs in order.
    check_golden(MD / "one_cell.md", text)
    for key in HEADER:
        assert f"- {key}: " in text
    positions = [text.index(s) for s in SECTIONS]
    assert positions == sorted(positions)
    assert "## Sign flips" not in text  # only once another parallelism is covered
    appendix = text[text.index("## Appendix"):]
    assert appendix.index("| 99 |") < appendix.index("| 101 |") < appendix.index("| 106 |")


def test_extending_adds_the_cell_a_tldr_row_and_the_sign_flip_table() -> None:
    text = extend(write(_fsdp()), _pp())
    for s in SECTIONS:
        assert text.count(s) == (1 if s == "## TL;DR" else 2), s
    tldr = text[text.index("## TL;DR"):text.index("## Inventory")]
    assert "| FSDP=8 |" in tldr and "| PP=8 |" in tldr
    flips = text[text.index("## Sign flips vs other parallelisms"):]
    flips = flips[:flips.index("## Recommended")]
    rows = [line.split("|")[1].strip() for line in flips.splitlines()
            if line.startswith("| ")][1:]
    assert sorted(rows) == ["nch8", "ovl2", "protoS"]   # each flips sign
    assert text.count("<!-- sweepd:deltas") == 1
    # The whole file: the PP cell's deployment under its guard, the sign-flip table.
    check_golden(MD / "two_cells.md", text)


def test_a_bounded_cell_proposes_no_change() -> None:
    cell = _fsdp()
    bounded = Cell(cell.model_tag, "TP=8", "sparse", HEADER, "", "", cell.board[2:], None, "",
                   "structurally bounded at the editable scope", "", ())
    text = write(bounded)
    check_golden(MD / "bounded.md", text)


def test_negative_findings_and_sign_flips_rest_only_on_deltas_beyond_noise() -> None:
    from sweepd.kinds.xla_tuning.reporting.tuning_md import Standing

    noisy = Standing("nbuf", "NCCL_BUFFSIZE=16777216", 990.0, 28.0, -0.01, 1, ("5",), se=0.011)
    real = Standing("dbuf", "x", 970.0, 28.0, -0.03, 2, ("6", "7"), se=0.008)
    assert not noisy.beyond_noise and not noisy.confirmed
    assert real.beyond_noise and real.confirmed
    once = Standing("ovl2", "x", 1040.0, 28.0, 0.04, 1, ("8",), se=0.011)
    assert once.beyond_noise and not once.confirmed  # one run: no sign flip rests on it
