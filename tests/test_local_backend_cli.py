"""The local backend through the CLI: `init --backend local` writes a config that loads,
`check` reports the node and the train command (and a dry job), `validate` accepts a spec
without `nodes` naming a model sweepd has no shape for and refuses another node, and a
config without a train command is one line."""

from __future__ import annotations

import re
from pathlib import Path

from sweepd.config import ConfigError, load_config
from tests.golden_files import GOLDEN, check_golden_cases, scrubbed
from tests.local_trainer import local_config_text, train_command, write_trainer
from tests.support.service import sweepd, xdg_env


def test_init_for_local_writes_a_config_that_loads(tmp_path: Path) -> None:
    env = xdg_env(tmp_path)
    missing = sweepd(env, "init", "--backend", "local")
    assert missing.returncode == 2 and "--train-command" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    out = tmp_path / "local.toml"
    done = sweepd(env, "init", "--backend", "local", "--config", str(out),
                  "--train-command", "python3 -m maxtext.trainers.pre_train.train "
                  "src/maxtext/configs/base.yml", "--workdir", str(tmp_path),
                  "--node", "tpu1", "--gpus-per-node", "1", "--gpu-memory-gib", "15.75")
    assert done.returncode == 0, done.stderr
    config = load_config(out)
    assert config.cluster.backend == "local"
    assert config.cluster.local.argv == ["python3", "-m", "maxtext.trainers.pre_train.train",
                                         "src/maxtext/configs/base.yml"]
    assert config.cluster.local.workdir == tmp_path and config.cluster.local.node_name() == \
        "tpu1"
    assert (config.cluster.gpus_per_node, config.cluster.gpu_memory_gib) == (1, 15.75)


def test_a_local_config_needs_a_train_command(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[cluster]\nbackend = "local"\n')
    try:
        load_config(path)
    except ConfigError as e:
        assert "cluster.local.train_command" in str(e) and "\n" not in str(e)
    else:
        raise AssertionError("a local config without a train command loaded")


def test_check_reports_the_node_the_train_command_and_a_dry_job(tmp_path: Path) -> None:
    trainer = write_trainer(tmp_path)
    config = tmp_path / "sweepd.toml"
    config.write_text(local_config_text(tmp_path, trainer))
    (tmp_path / "state").mkdir()
    env = xdg_env(tmp_path)
    checked = sweepd(env, "check", "--config", str(config), "--job", "tiny-llama")
    assert checked.returncode == 0, checked.stdout
    lines = checked.stdout.splitlines()
    assert any(line.startswith(f"ok   train command: {train_command(trainer)}")
               for line in lines), lines
    # The local backend's own lines, whole: the one node, the dry job's 15 step lines (its
    # scratch folder, made afresh each time, put as <scratch>), the slot's lock.
    said = {"ok": "\n".join(re.sub(r"\S*/sweepd-check-[^/\s]+", "<scratch>", line)
                            for line in lines if line.startswith(
                                ("ok   scheduler", "ok   dry job", "ok   slot")))}
    # The dry job's records lived in a scratch folder: nothing landed in sweepd's state.
    assert not (tmp_path / "state" / "local").exists()
    broken = tmp_path / "broken.toml"
    broken.write_text(local_config_text(tmp_path, tmp_path / "nowhere" / "train.py")
                      .replace(train_command(tmp_path / "nowhere" / "train.py"),
                               "no-such-trainer --x"))
    failed = sweepd(env, "check", "--config", str(broken))
    assert failed.returncode == 1
    said["no trainer on PATH"] = "\n".join(
        line for line in failed.stdout.splitlines() if line.startswith("FAIL"))
    # A lock file no process can open (under a regular file): a FAIL line, and no start.
    (tmp_path / "afile").write_text("")
    unlockable = tmp_path / "unlockable.toml"
    unlockable.write_text(local_config_text(tmp_path, trainer).replace(
        str(tmp_path / "slot.lock"), str(tmp_path / "afile" / "slot.lock")))
    failed = sweepd(env, "check", "--config", str(unlockable))
    assert failed.returncode == 1
    said["a lock under a file"] = "\n".join(
        line for line in failed.stdout.splitlines() if line.startswith("FAIL"))
    check_golden_cases(GOLDEN / "cli" / "check_local.txt",
                       {k: scrubbed(v, tmp=tmp_path) for k, v in said.items()})


def test_validate_takes_a_spec_without_nodes_and_refuses_another_node(
        tmp_path: Path) -> None:
    trainer = write_trainer(tmp_path)
    config = tmp_path / "sweepd.toml"
    config.write_text(local_config_text(tmp_path, trainer))
    spec = tmp_path / "spec.yaml"
    spec.write_text("kind: model-perf\nmodel: my-own-model\n")
    env = xdg_env(tmp_path)
    done = sweepd(env, "validate", "--config", str(config), str(spec))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "on 1 nodes box1 (cluster backend: local" in done.stdout
    assert "per_device_batch_size=1" in done.stdout   # the small first probe
    spec.write_text("kind: model-perf\nmodel: my-own-model\nnodes: gpu7\n")
    refused = sweepd(env, "validate", "--config", str(config), str(spec))
    assert refused.returncode == 2 and "not nodes of this cluster: gpu7" in refused.stderr


def test_the_example_config_loads() -> None:
    config = load_config(Path(__file__).parents[1] / "examples" / "local.toml")
    assert config.cluster.backend == "local"
    assert config.cluster.local.argv[:3] == ["python3", "-m",
                                             "maxtext.trainers.pre_train.train"]
    assert config.cluster.local.env["DECOUPLE_GCLOUD"] == "TRUE"
