"""Shapes of the models sweepd knows (public figures, approximate).

Used to validate specs (an unknown model is refused), to estimate memory, and by the
simulated cluster. Sequence length and parallelism defaults follow the model configs.
"""

from __future__ import annotations

from dataclasses import dataclass


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
    )
}


class UnknownModel(ValueError):
    pass


def resolve_model(name: str) -> ModelShape:
    """Exact name, or a unique substring as submit.sh resolves it (`70b` -> llama2-70b)."""
    if name in MODELS:
        return MODELS[name]
    matches = [m for m in MODELS if name and name in m]
    if len(matches) == 1:
        return MODELS[matches[0]]
    known = ", ".join(sorted(MODELS))
    if not matches:
        raise UnknownModel(f"unknown model {name!r}; known models: {known}")
    raise UnknownModel(f"model {name!r} is ambiguous: {', '.join(sorted(matches))}")
