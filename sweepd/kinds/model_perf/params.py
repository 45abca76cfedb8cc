"""The swept value in a run's typed params: a MaxText override, or an environment variable
when the spec names its parameter as the toolkit does (`_env_XLA_PYTHON_CLIENT_MEM_FRACTION`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sweepd.store.rows import RunParams, Scalar

ENV_PREFIX = "_env_"   # the spec's way to name a swept environment variable


def run_params(parameter: str, value: Scalar) -> RunParams:
    if parameter.startswith(ENV_PREFIX):
        return RunParams(env={parameter.removeprefix(ENV_PREFIX): str(value)})
    return RunParams(overrides={parameter: value})


def pair_params(parameter: str, value: Scalar, second: str, other: Scalar) -> RunParams:
    """A two-parameter run's params: the batch and the second knob's value."""
    a, b = run_params(parameter, value), run_params(second, other)
    return RunParams(overrides={**a.overrides, **b.overrides}, env={**a.env, **b.env})


def swept_value(parameter: str, params: RunParams, values: Sequence[Any] | None = None
                ) -> Scalar | None:
    """The value a run was planned with. An environment variable is text: it is the
    spec's candidate it was written from (`0.85`, not `"0.85"`), else the text."""
    if not parameter.startswith(ENV_PREFIX):
        return params.overrides.get(parameter)
    text = params.env.get(parameter.removeprefix(ENV_PREFIX))
    if text is None:
        return None
    return next((v for v in values or () if isinstance(v, str | int | float)
                 and str(v) == text), text)
