"""Shapes of the models sweepd knows (public figures, approximate).

Used to validate specs (an unknown model is refused), to estimate memory, and by the
simulated cluster. Sequence length and parallelism defaults follow the model configs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

import yaml


@dataclass(frozen=True)
class ModelShape:
    name: str
    params_b: float  # total parameters, billions
    active_b: float  # parameters active per token, billions (= params_b when dense)
    layers: int
    d_model: int
    experts: int = 0
    seq_len: int = 4096
    min_nodes: int = 1
    gpus_per_node: int = 8

    @property
    def moe(self) -> bool:
        return self.experts > 0


MODELS: dict[str, ModelShape] = {
    m.name: m
    for m in (
        ModelShape("llama2-70b", 70, 70, 80, 8192, min_nodes=1),
        ModelShape("mixtral-8x22b", 141, 39, 56, 6144, experts=8, min_nodes=4),
        ModelShape("grok-1", 314, 86, 64, 6144, experts=8, min_nodes=8),
        ModelShape("grok-2", 270, 115, 64, 8192, experts=8, min_nodes=8),
        ModelShape("llama3.1-405b", 405, 405, 126, 16384, min_nodes=8),
        ModelShape("deepseek3-671b", 671, 37, 61, 7168, experts=256, min_nodes=8),
        ModelShape("kimi-k2-1t", 1000, 32, 61, 7168, experts=384, min_nodes=8),
        ModelShape("qwen3-480b-a35b", 480, 35, 62, 6144, experts=160, min_nodes=8),
        # The 0.27 B llama2-style config real MaxText ran on one TPU v5e chip
        # (/work/shared/reference/tpu; examples/scenarios/tpu-v5e-maxtext-0.27b.yaml).
        ModelShape("maxtext-0.27b", 0.267, 0.267, 12, 1024, seq_len=2048, min_nodes=1,
                   gpus_per_node=1),
    )
}


class UnknownModel(ValueError):
    pass


# A name this close to a known one (edits: a letter added, dropped or changed) and not it
# is a typo, even where submit.sh's glob would take it as a substring (`lama2-70b`).
TYPO_EDITS = 2


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance: the fewest one-letter insertions, deletions and changes."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def typo_of(name: str, known: Iterable[str]) -> list[str]:
    """The known names `name` is a typo of (within TYPO_EDITS edits, not equal)."""
    return sorted(k for k in known if k != name and edit_distance(name, k) <= TYPO_EDITS)


def resolve_model(name: str) -> ModelShape:
    """Exact name, or a unique substring as submit.sh resolves it (`70b` -> llama2-70b);
    never a typo of a known name (`lama2-70b`): that is refused with the name meant."""
    if name in MODELS:
        return MODELS[name]
    meant = typo_of(name, MODELS)
    if meant:
        raise UnknownModel(f"unknown model {name!r} (did you mean {' or '.join(meant)}?)")
    matches = [m for m in MODELS if name and name in m]
    if len(matches) == 1:
        return MODELS[matches[0]]
    known = ", ".join(sorted(MODELS))
    if not matches:
        raise UnknownModel(f"unknown model {name!r}; known models: {known}")
    raise UnknownModel(f"model {name!r} is ambiguous: {', '.join(sorted(matches))}")


# A name submit.sh can take as `configs/<name>.gpu.yml`: no path, no option.
_CONFIG_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def find_model(name: str, repo: Path | None) -> tuple[str, ModelShape | None]:
    """The model a spec names: a built-in shape (exact or a unique substring), else the
    toolkit repo's `configs/<name>.gpu.yml` (submit.sh mode) with the shape it gives (None:
    it gives none, so no memory estimate). Neither: UnknownModel naming where it looked."""
    try:
        shape = resolve_model(name)
        return shape.name, shape
    except UnknownModel as e:
        builtin = str(e)
    if repo is None:
        raise UnknownModel(f"{builtin}; no toolkit repo to look in (a repo's "
                           "configs/<model>.gpu.yml counts in submit.sh mode: "
                           "cluster.slurm.repo)")
    path = repo / "configs" / f"{name}.gpu.yml"
    if not _CONFIG_NAME.match(name) or not path.is_file():
        raise UnknownModel(f"{builtin}; nor is there a toolkit config {path}")
    return name, shape_from_config(path)


def shape_from_config(path: Path) -> ModelShape | None:
    """The shape a toolkit config (`configs/<name>.gpu.yml`) gives, or None when it gives
    none: MaxText's shape keys when the config overrides them (`base_emb_dim`,
    `base_num_decoder_layers`, ...), else its `model_name` when sweepd knows that model.
    Parameter counts are approximate (gated MLP, untied embeddings), as the SKILL.md
    estimate is."""
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(raw, dict):
        return None
    name = path.name.removesuffix(".gpu.yml")
    seq = _int(raw.get("max_target_length")) or 4096
    nodes = math.prod(v for k, v in raw.items()
                      if k.startswith("dcn_") and isinstance(v, int) and v > 1)
    d, layers = _int(raw.get("base_emb_dim")), _int(raw.get("base_num_decoder_layers"))
    if d and layers:
        total, active, experts = _params(raw, d, layers)
        return ModelShape(name, total / 1e9, active / 1e9, layers, d, experts, seq,
                          min_nodes=nodes)
    try:
        known = resolve_model(str(raw.get("model_name", "")))
    except UnknownModel:
        return None
    return replace(known, name=name, seq_len=seq, min_nodes=max(known.min_nodes, nodes))


def _params(raw: dict[str, object], d: int, layers: int) -> tuple[float, float, int]:
    """(total, active per token, experts) parameters from MaxText's shape keys."""
    heads = _int(raw.get("base_num_query_heads")) or max(1, d // 128)
    kv = _int(raw.get("base_num_kv_heads")) or heads
    head_dim = _int(raw.get("head_dim")) or d // heads
    mlp = _int(raw.get("base_mlp_dim")) or 4 * d
    experts = _int(raw.get("num_experts")) or 0
    top_k = _int(raw.get("num_experts_per_tok")) or 1
    attention = 2 * d * heads * head_dim + 2 * d * kv * head_dim
    ffn = 3 * d * mlp
    embed = 2 * (_int(raw.get("vocab_size")) or 32000) * d
    if experts > 1:
        return (layers * (attention + experts * ffn) + embed,
                layers * (attention + top_k * ffn) + embed, experts)
    return layers * (attention + ffn) + embed, layers * (attention + ffn) + embed, 0


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 \
        else None
