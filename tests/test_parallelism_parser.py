"""The three kinds that read a parallelism share one parser (kinds/spec.py) and still accept
and refuse what each did before, each in its own words: model perf and campaign take a
degree up to 9999, the XLA catalog any; campaign's own parser takes the text its spec
normalised (upper case, no spaces), its spec any spelling."""

from __future__ import annotations

import re
from typing import Any

import pytest

from sweepd.kinds.campaign import spec as campaign
from sweepd.kinds.model_perf import spec as model_perf
from sweepd.kinds.parse import parse_spec
from sweepd.kinds.spec import SpecError, axes_text, parse_axes
from sweepd.kinds.xla_tuning.catalog.catalog import Axis, Parallelism


@pytest.mark.parametrize(("text", "axes"), [
    ("FSDP=8", {"FSDP": 8}),
    ("PP=8,TP=2", {"PP": 8, "TP": 2}),
    (" pp=8 ", {"PP": 8}),
    ("pp=4, fsdp=2", {"PP": 4, "FSDP": 2}),
    ("FSDP = 8", {"FSDP": 8}),
    ("FSDP=9999", {"FSDP": 9999}),
])
def test_model_perf_and_the_catalog_read_any_spelling(text: str, axes: dict[str, int]) -> None:
    assert model_perf.parse_parallelism(text) == axes
    par = Parallelism.parse(text)
    assert par.axes == tuple((Axis(a), n) for a, n in axes.items())
    assert par.text == axes_text(axes)


@pytest.mark.parametrize(("text", "axes"), [
    ("FSDP=8", {"FSDP": 8}),
    ("PP=8,TP=2", {"PP": 8, "TP": 2}),
    ("FSDP=9999", {"FSDP": 9999}),
])
def test_campaign_reads_its_normalised_text(text: str, axes: dict[str, int]) -> None:
    assert campaign.parse_parallelism(text) == axes


# Refused by every kind: model perf and the XLA kind say it in the shared words, campaign in
# its own.
REFUSED = [
    ("FSDP=8,FSDP=2", "axis FSDP given twice", "FSDP is given twice"),
    ("XX=2", "'XX=2' is not AXIS=N (FSDP, PP, TP)", "each part is FSDP=N, PP=N or TP=N"),
    ("FSDP=0", "'FSDP=0' is not AXIS=N (FSDP, PP, TP)", "each part is FSDP=N, PP=N or TP=N"),
    ("", "'' is not AXIS=N (FSDP, PP, TP)", "each part is FSDP=N, PP=N or TP=N"),
]
CAMPAIGN = {"kind": "campaign", "nodes": "n[1-20]", "budget_hours": 4}


@pytest.mark.parametrize(("text", "shared_says", "campaign_says"), REFUSED)
def test_each_kind_refuses_in_its_own_words(text: str, shared_says: str,
                                            campaign_says: str) -> None:
    for parse, says in [(model_perf.parse_parallelism, shared_says),
                        (campaign.parse_parallelism, campaign_says),
                        (Parallelism.parse, shared_says)]:
        with pytest.raises(ValueError, match=re.escape(f"parallelism {text!r}: {says}")):
            parse(text)


def test_a_degree_above_9999_is_refused_by_model_perf_and_campaign_only() -> None:
    with pytest.raises(ValueError, match=re.escape(
            "parallelism 'FSDP=12345': 'FSDP=12345' is not AXIS=N (FSDP, PP, TP)")):
        model_perf.parse_parallelism("FSDP=12345")
    with pytest.raises(ValueError, match=re.escape(
            "parallelism 'FSDP=12345': each part is FSDP=N, PP=N or TP=N")):
        campaign.parse_parallelism("FSDP=12345")
    assert Parallelism.parse("FSDP=12345").degree(Axis.FSDP) == 12345
    assert parse_axes("FSDP=12345") == {"FSDP": 12345}
    # At the specs: the XLA kind reads it, and refuses it for the slot's node count.
    for extra, says in [({"kind": "model-perf", "nodes": "n[1-8]"}, "'FSDP=12345' is not AXIS=N"),
                        (CAMPAIGN, "each part is FSDP=N, PP=N or TP=N"),
                        ({"kind": "xla-tuning", "node_count": 8},
                         "its DCN axes (FSDP x PP) make 12345, not the 8 nodes")]:
        with pytest.raises(SpecError, match=re.escape(f"parallelism 'FSDP=12345': {says}")):
            _spec("FSDP=12345", **extra)


@pytest.mark.parametrize("text", [" pp=8 ", "FSDP = 8", "pp=4, fsdp=2"])
def test_campaigns_own_parser_refuses_a_spelling_its_spec_normalises(text: str) -> None:
    with pytest.raises(ValueError, match="each part is FSDP=N, PP=N or TP=N"):
        campaign.parse_parallelism(text)


def _spec(parallelism: str, **fields: Any) -> Any:
    return parse_spec({"model": "llama2-70b", "parallelism": parallelism, **fields})


def test_each_kinds_spec_takes_a_loose_spelling() -> None:
    assert _spec(" pp=8 ", kind="model-perf", nodes="n[1-8]").parallelism == "PP=8"
    assert _spec(" pp=8 ", **CAMPAIGN).parallelism == "PP=8"
    assert _spec("fsdp=8\u3000", **CAMPAIGN).parallelism == "FSDP=8"
    xla = _spec(" pp=8 ", kind="xla-tuning", node_count=8)
    assert xla.parallelism == " pp=8 " and xla.parsed_parallelism().text == "PP=8"


@pytest.mark.parametrize(("text", "shared_says", "campaign_says"), REFUSED)
def test_each_kinds_spec_refuses_in_its_own_words(text: str, shared_says: str,
                                                 campaign_says: str) -> None:
    for extra, says in [({"kind": "model-perf", "nodes": "n[1-8]"}, shared_says),
                        (CAMPAIGN, campaign_says),
                        ({"kind": "xla-tuning", "node_count": 8}, shared_says)]:
        with pytest.raises(SpecError, match=re.escape(f"parallelism {text!r}: {says}")):
            _spec(text, **extra)
