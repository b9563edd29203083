"""Thread-block cluster shapes of the Hopper GEMM (docs/hopper_cluster.md): the values of ``cluster:`` and what
follows from one. Pure, no imports beyond typing: the problem reader, the kernel's configuration and the search's
points all derive their cluster fields here."""

from __future__ import annotations

from typing import Optional

CLUSTERS = ("1x1", "2x1", "1x2")
"""Cluster shapes ``M x N`` in CTAs (CUTLASS's ``ClusterShape<M, N, 1>``): ``2x1`` pairs two CTAs of one tile column
(they share and multicast B), ``1x2`` two CTAs of one tile row (sharing A)."""
SHARED_OPERAND = {"2x1": "B", "1x2": "A"}
"""The operand a cluster shape's CTAs share and multicast (read from L2 once per cluster)."""


def cluster_dims(cluster: str) -> tuple[int, int]:
    """``(CTAs along M, CTAs along N)`` of a cluster shape of :data:`CLUSTERS`; ``(1, 1)`` for anything else."""
    if cluster not in CLUSTERS:
        return 1, 1
    m, n = cluster.split("x")
    return int(m), int(n)


class ClusterShaped:
    """Mixin of a configuration with a ``cluster`` field (a value of :data:`CLUSTERS`): its cluster's extent along
    M (the grid's y, tile rows) and N (the grid's x, tile columns), its size and the operand its CTAs share."""

    cluster: str

    @property
    def cluster_m(self) -> int:
        """CTAs of the cluster along M (the grid's y, tile rows): 2 for ``2x1``, else 1."""
        return cluster_dims(self.cluster)[0]

    @property
    def cluster_n(self) -> int:
        """CTAs of the cluster along N (the grid's x, tile columns): 2 for ``1x2``, else 1."""
        return cluster_dims(self.cluster)[1]

    @property
    def cluster_size(self) -> int:
        """CTAs in the cluster (1 or 2)."""
        return self.cluster_m * self.cluster_n

    @property
    def shared_operand(self) -> Optional[str]:
        """The operand the cluster's CTAs share and multicast: ``B`` for ``2x1``, ``A`` for ``1x2``, None for
        ``1x1``."""
        return SHARED_OPERAND.get(self.cluster)


__all__ = ["CLUSTERS", "SHARED_OPERAND", "cluster_dims", "ClusterShaped"]
