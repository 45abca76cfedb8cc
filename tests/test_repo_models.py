"""Models the toolkit's repo defines (configs/*.gpu.yml), beyond sweepd's built-in shapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from sweepd.app.service import Service
from sweepd.core.states import RunState, SweepState
from sweepd.kinds.api import SweepContext
from sweepd.kinds.model_perf.facts import PerfFacts
from sweepd.kinds.model_perf.rules import LARGEST_FIT
from sweepd.kinds.model_perf.search import Outcome, Probe, next_probe
from sweepd.kinds.model_perf.search_space import search_space
from sweepd.kinds.model_perf.spec import BATCH, ModelPerfSpec
from sweepd.kinds.parse import parse_spec
from sweepd.store.rows import RunParams
from sweepd.util.model_shapes import UnknownModel, find_model, resolve_model, shape_from_config
from tests.golden_files import GOLDEN, check_golden, check_golden_cases, scrubbed
from tests.simrun import open_store, perf_spec, run, write_scenario
from tests.slurm_cluster import MAXTEXT_FIXTURE, slurm_env
from tests.slurm_sweep import submit_sh_config
from tests.support.service import NODES, SPEC, Api, Daemon, write_spec

__all__ = ["slurm_env"]   # the fixture, used by name

LLAMA3_8B = """\
base_config: base.yml
model_name: llama3-8b
base_emb_dim: 4096
base_num_query_heads: 32
base_num_kv_heads: 8
base_mlp_dim: 14336
base_num_decoder_layers: 32
head_dim: 128
vocab_size: 128256
max_target_length: 8192
per_device_batch_size: 2
"""


def _config(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / "configs" / f"{name}.gpu.yml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def test_a_config_with_shape_keys_gives_the_shape(tmp_path: Path) -> None:
    shape = shape_from_config(_config(tmp_path, "llama3-8b", LLAMA3_8B))
    assert shape is not None and shape.name == "llama3-8b"
    assert shape.params_b == pytest.approx(8.03, abs=0.05)   # Meta's figure: 8.03B
    assert (shape.layers, shape.d_model, shape.seq_len, shape.moe) == (32, 4096, 8192, False)


def test_a_config_naming_a_known_model_takes_its_shape(tmp_path: Path) -> None:
    text = "model_name: llama2-70b\nmax_target_length: 2048\ndcn_fsdp_parallelism: 2\n"
    shape = shape_from_config(_config(tmp_path, "llama2-70b-2n", text))
    assert shape is not None and shape.name == "llama2-70b-2n"
    assert (shape.params_b, shape.seq_len, shape.min_nodes) == \
        (resolve_model("llama2-70b").params_b, 2048, 2)


@pytest.mark.parametrize("text", ["model_name: something-new\n", "- a list\n", ": bad: yaml:\n",
                                  "base_emb_dim: many\nbase_num_decoder_layers: 2\n"])
def test_a_config_without_a_shape_gives_none(tmp_path: Path, text: str) -> None:
    assert shape_from_config(_config(tmp_path, "qwen3-14b", text)) is None


def test_a_model_without_a_shape_starts_small_and_lets_the_memory_line_do_the_rest() -> None:
    spec = ModelPerfSpec.model_construct(
        kind="model-perf", model="qwen3-14b", nodes="chi[1-2]", parameter="per_device_batch_size",
        values=None, lower=1, upper=None, gpu_memory_gib=None, mem_fraction=None, max_runs=12,
        overrides={}, env={})
    ctx = SweepContext(runs=[], nodes=["chi1", "chi2"], gpu_memory_gib=192, facts=PerfFacts())
    space, why = search_space(spec, ctx)
    first = next_probe(space, [])
    assert first is not None and first.value == 1 and "a small first probe" in first.why
    assert "no shape known for qwen3-14b" in why
    ran = Probe(1, Outcome.OK, 500.0, temp_gb=6.0, fixed_gb=30.0, limit_gb=178.5)
    second = next_probe(space, [ran])
    assert second is not None and second.value == 24   # (176.7 - 30) / 6
    assert second.rule == LARGEST_FIT.id


# -- accepted in submit.sh mode: the daemon's validation and the CLI's --------------------

def test_find_model_takes_a_built_in_shape_then_the_repos_config() -> None:
    assert find_model("70b", MAXTEXT_FIXTURE) == ("llama2-70b", resolve_model("llama2-70b"))
    name, shape = find_model("llama3-8b", MAXTEXT_FIXTURE)
    assert name == "llama3-8b" and shape is not None and shape.d_model == 4096
    with pytest.raises(UnknownModel, match="nor is there a toolkit config "
                       f"{MAXTEXT_FIXTURE}/configs/qwen9.gpu.yml"):
        find_model("qwen9", MAXTEXT_FIXTURE)
    with pytest.raises(UnknownModel, match="no toolkit repo to look in"):
        find_model("llama3-8b", None)
    with pytest.raises(UnknownModel, match="nor is there"):   # a name, never a path
        find_model("../configs/llama3-8b", MAXTEXT_FIXTURE)


def _submit_sh(service: Service, repo: Path | None) -> None:
    """The daemon's config in submit.sh mode with `repo` (its backend stays the sim's)."""
    engine = service.engine
    cluster = engine.config.cluster
    engine.config = engine.config.model_copy(update={"cluster": cluster.model_copy(update={
        "backend": "slurm", "slurm": cluster.slurm.model_copy(
            update={"mode": "submit_sh", "repo": repo})})})


async def test_the_daemon_accepts_a_model_the_repo_configures_with_its_shape(
        api: Api) -> None:
    spec = {**SPEC, "model": "llama3-8b"}
    status, body = await api.call("POST", "/sweeps", json=spec)
    assert status == 422 and "no toolkit repo to look in" in body["error"]
    _submit_sh(api.service, MAXTEXT_FIXTURE)
    status, plan = await api.call("POST", "/validate", json=spec)
    assert status == 200, plan
    # The estimate from the config's shape: 8B over 64 GPUs, 8192 x 4096 x 32 x 12 B.
    assert "params 0.2 GB" in plan["first_plan"]["runs"][0]["reason"]
    check_golden(GOLDEN / "repo_models" / "first_probe_by_shape.txt",
                 plan["first_plan"]["runs"][0]["reason"] + "\n")
    status, body = await api.call("POST", "/sweeps", json=spec)
    assert status == 201, body
    stored = (await api.store.sweeps.get(body["id"])).spec
    assert stored["model"] == "llama3-8b" and stored["toolkit_shape"]["layers"] == 32


async def test_the_daemon_refuses_a_model_nowhere_saying_where_it_looked(api: Api) -> None:
    _submit_sh(api.service, MAXTEXT_FIXTURE)
    status, body = await api.call("POST", "/sweeps", json={**SPEC, "model": "qwen9"})
    assert status == 422, body
    assert body["details"][0]["loc"] == ["model"]
    # The known models, and the toolkit config it looked for.
    check_golden(GOLDEN / "repo_models" / "unknown_model.txt",
                 scrubbed(body["error"] + "\n", toolkit=MAXTEXT_FIXTURE))
    assert (await api.call("GET", "/sweeps"))[1] == []


async def test_a_shape_given_with_the_spec_must_be_the_configs(api: Api) -> None:
    _submit_sh(api.service, MAXTEXT_FIXTURE)
    status, body = await api.call("POST", "/sweeps", json={**SPEC, "model": "llama3-8b"})
    stored = (await api.store.sweeps.get(body["id"])).spec
    assert (await api.call("POST", "/sweeps", json=stored))[0] == 201   # submitted again
    wrong = {**stored, "toolkit_shape": {**stored["toolkit_shape"], "layers": 80}}
    refusals: dict[str, str] = {}
    status, body = await api.call("POST", "/sweeps", json=wrong)
    assert status == 422
    refusals["another shape than the config's"] = body["error"]
    built_in = {**SPEC, "toolkit_shape": stored["toolkit_shape"]}
    status, body = await api.call("POST", "/sweeps", json=built_in)
    assert status == 422
    refusals["a shape for a built-in model"] = body["error"]
    status, body = await api.call("POST", "/sweeps", json={**wrong, "toolkit_shape": {"x": 1}})
    assert status == 422
    refusals["not a shape"] = body["error"]
    check_golden_cases(GOLDEN / "repo_models" / "shape_refusals.txt", refusals)


def test_the_cli_passes_a_given_shape_on_for_the_daemon_to_judge() -> None:
    shape = {"name": "llama3-8b", "params_b": 8.0, "active_b": 8.0, "layers": 32,
             "d_model": 4096}
    spec = parse_spec({**SPEC, "model": "llama3-8b", "toolkit_shape": shape}, client=True)
    assert spec.model_dump(mode="json", exclude_unset=True)["toolkit_shape"]["layers"] == 32


async def test_the_cli_leaves_a_model_it_does_not_know_to_the_daemon(
        daemon: Daemon, tmp_path: Path) -> None:
    _submit_sh(daemon.service, MAXTEXT_FIXTURE)
    good = write_spec(tmp_path, f"kind: model-perf\nmodel: llama3-8b\nnodes: {NODES!r}\n")
    code, out, err = await daemon.run("validate", good)
    assert code == 0, err
    # The plan `validate` prints, aimed by the config's shape.
    check_golden(GOLDEN / "repo_models" / "validate_by_shape.txt", scrubbed(out, tmp=tmp_path))
    code, out, _ = await daemon.run("submit", good)
    assert code == 0 and out == "1\n"
    bad = write_spec(tmp_path, f"kind: model-perf\nmodel: qwen9\nnodes: {NODES!r}\n", "b.yaml")
    code, out, err = await daemon.run("submit", bad)
    assert code != 0 and out == ""
    assert f"{MAXTEXT_FIXTURE}/configs/qwen9.gpu.yml" in err


async def test_a_later_sweep_of_a_repo_model_starts_from_the_earlier_one(api: Api) -> None:
    """The prior is found from the stored spec alone (no repo needed to read it back)."""
    _submit_sh(api.service, MAXTEXT_FIXTURE)
    status, body = await api.call("POST", "/sweeps", json={**SPEC, "model": "llama3-8b"})
    first = body["id"]
    for value, outcome in ((6, "pass"), (7, "oom")):
        run = await api.store.runs.add(first, f"b={value}", RunParams(overrides={BATCH: value}),
                                           NODES, "t")
        await api.store.runs.transition(run.id, RunState.ACTIVE, "a")
        await api.store.runs.transition(run.id, RunState.PASSED if outcome == "pass"
                                            else RunState.FAILED, "x", outcome=outcome,
                                            tgs=900.0 if outcome == "pass" else None)
    await api.store.sweeps.transition(first, SweepState.RUNNING, "started")
    await api.store.sweeps.transition(first, SweepState.DONE, "done", verdict={
        "best": 6, "tgs": 900.0, "settled": True, "nodes": 8})
    status, plan = await api.call("POST", "/validate", json={**SPEC, "model": "llama3-8b"})
    assert status == 200, plan
    check_golden(GOLDEN / "repo_models" / "first_probe_by_prior.txt",
                 scrubbed(plan["first_plan"]["runs"][0]["reason"] + "\n", sweep=f"#{first}"))


@pytest.mark.slurm
async def test_a_repo_model_goes_to_submit_sh_by_its_config_name(
        tmp_path: Path, slurm_env: dict[str, str]) -> None:
    """On the real Slurm cluster: the sweep is accepted, its first probe is aimed by the
    config's shape, and submit.sh runs the job under that config. (The payload, the
    simulated trainer, knows only the built-in models: it reports a config error, which
    stops the sweep; that the job ran as llama3-8b is what is checked here.)"""
    config = submit_sh_config(tmp_path, write_scenario(tmp_path, time_scale=0.004))
    code, lines = await run(config, perf_spec(nodes="chi[2832,2863]", model="llama3-8b"))
    store = await open_store(config)
    try:
        events = await store.events.of_sweep(1)
        jobs = await store.jobs.of_sweep(1)
    finally:
        await store.close()
    aimed = [e.reason for e in events if e.reason and "(shape from configs/" in e.reason]
    check_golden(GOLDEN / "repo_models" / "slurm_first_probe.txt", "".join(
        f"{reason}\n" for reason in aimed))
    assert jobs and jobs[0].backend_id is not None, lines
    repo = config.cluster.slurm.repo
    assert repo is not None and any((repo / "outputs").glob("*-JAX-llama3-8b-*.log"))
    assert code != 0
