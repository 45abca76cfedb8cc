"""The cluster backends serve every kind and name none: a per-job profile reaches the
toolkit's train_env.sh through clusters/train_env/, whichever kind filled it."""

from __future__ import annotations

from tests.support.layering import _graph


def test_the_cluster_backends_import_no_kind() -> None:
    wrong = sorted(f"{m} -> {t}" for m, targets in _graph().items()
                   if m.startswith("sweepd.clusters")
                   for t in targets if t.startswith("sweepd.kinds"))
    assert wrong == []


def test_the_slurm_backend_is_a_package_of_parts() -> None:
    """Each of the backend's jobs in its own module (the import graph says who uses whom):
    the facade reaches the runner, the queries and both modes; the modes do not reach
    each other."""
    graph = _graph()
    base = "sweepd.clusters.slurm"
    assert {f"{base}.commands", f"{base}.queries", f"{base}.direct",
            f"{base}.submit_sh"} <= graph[f"{base}.cluster"]
    assert f"{base}.submit_sh" not in graph[f"{base}.direct"]
    assert f"{base}.direct" not in graph[f"{base}.submit_sh"]
