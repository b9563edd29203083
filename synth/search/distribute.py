"""Many shapes at once: :func:`search_gemm` in local processes or on a Dask cluster.

Input: shapes and :func:`~synth.search.tune.search_gemm` keyword arguments.
Output: one :class:`~synth.search.results.SearchResult` per shape, in order —
the same whichever way they ran (searches are deterministic). Jobs are sent as
``((M, N, K), kwargs)`` to the module-level :func:`search_shape`, so they
pickle for a spawned ``multiprocessing`` pool and Dask.
"""

from __future__ import annotations

from typing import Optional, Sequence

from ..deadline import ignore_sigint
from ..errors import SynthError
from .results import SearchResult
from .shapes import as_shape
from .tune import search_gemm


def search_shape(args: tuple[tuple[int, int, int], dict]) -> SearchResult:
    """One job of :func:`search_many`: ``search_gemm(M, N, K, **kwargs)`` for ``((M, N, K), kwargs)``."""
    (M, N, K), kw = args
    return search_gemm(M, N, K, **kw)


def search_many(shapes: Sequence[tuple[int, int, int]], *, scheduler: Optional[str] = None, processes: int = 2,
                **kw) -> list[SearchResult]:
    """:func:`search_gemm` for each shape, in the given order.

    Local processes (a spawned ``multiprocessing`` pool whose workers ignore SIGINT) by
    default; with ``scheduler`` (``tcp://host:port``, or any address
    ``distributed.Client`` accepts) on that Dask cluster. The results are the
    same either way (see the module docstring on determinism).
    """
    shapes = [as_shape(s) for s in shapes]
    kw = dict(kw)
    kw.pop("progress", None)
    jobs = [(s, kw) for s in shapes]
    if scheduler:
        try:
            # dask: optional (the dist extra), only with a scheduler address
            from distributed import Client
        except ImportError:
            raise SynthError(None, "--scheduler needs Dask, which is not installed",
                             "pip install 'dask[distributed]' (or drop --scheduler to use local processes)") from None
        try:
            client = Client(scheduler, timeout=10, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise SynthError(None, f"cannot reach the Dask scheduler at {scheduler}: {exc}",
                             "start one with 'dask scheduler' and workers with 'dask worker ADDRESS'") from None
        try:
            futures = client.map(search_shape, jobs, pure=False)
            return list(client.gather(futures))
        finally:
            client.close()
    if processes <= 1 or len(jobs) <= 1:
        return [search_shape(j) for j in jobs]
    import multiprocessing


    # Ctrl-C: the workers ignore SIGINT, this process gets KeyboardInterrupt at once and leaving the
    # block terminates the workers (a ProcessPoolExecutor would wait for each running search to end)
    with multiprocessing.get_context("spawn").Pool(min(processes, len(jobs)), initializer=ignore_sigint) as pool:
        return pool.map(search_shape, jobs, chunksize=1)
