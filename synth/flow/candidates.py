"""After ranking: write the best candidates' folders (``synth search --top``), each through the flow of
``synth solve``.

Input: a :class:`~synth.search.results.SearchResult`. Output: one folder per candidate (solve -> lower -> verify
-> emit, :func:`write_candidates`), or :class:`TopIncomplete` naming those whose proofs ran out of time. Timing
the folders' kernels on a GPU is :func:`synth.run.measure`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Optional, Sequence

from ..deadline import TimeUp
from ..errors import Loc, SynthError
from ..gemm import expand_gemm

if TYPE_CHECKING:
    from ..search.results import Progress, SearchResult


class TopIncomplete(TimeUp):
    """Some ``--top`` folders were not written: their proofs ran out of ``--time-limit`` (exit 1, code
    ``time_limit``). ``written``: the folders written (complete); ``missing``: ``(rank, folder, why)`` of each
    one not written (no such folder exists). The ranking stands: ``synth search`` prints it (and puts it in its
    JSON) before this error."""

    def __init__(self, written: Sequence[str], missing: Sequence[tuple[int, str, str]],
                 limit: Optional[float] = None) -> None:
        self.written = list(written)
        self.missing = list(missing)
        names = ", ".join(f"#{rank} {folder}" for rank, folder, _ in self.missing)
        lim = f" ({limit:g} s)" if limit is not None else ""
        why = f" ({self.missing[0][2]})" if len(self.missing) == 1 else ""
        msg = (f"the time limit{lim} of each --top folder ran out for {len(self.missing)} of "
               f"{len(self.written) + len(self.missing)} folder(s): {names} not written{why}; "
               + (f"written: {', '.join(self.written)}" if self.written else "no folder was written")
               + "; the ranking is complete")
        SynthError.__init__(self, None, msg, "raise --time-limit (each --top folder's proofs get it), or solve "
                            "that candidate alone with 'synth solve' and a larger --time-limit")
        self.phase = "prove"

    def to_json(self) -> list[dict]:
        """``[{"rank", "folder", "reason"}]`` of the folders not written."""
        return [{"rank": rank, "folder": folder, "reason": why} for rank, folder, why in self.missing]


def write_candidates(result: SearchResult, out_dir: str, *, k: Optional[int] = None, time_limit: float = 20.0,
                     workers: int = 2, force: bool = False, progress: Optional[Progress] = None) -> list[str]:
    """Run solve -> lower -> verify -> emit for the ``k`` best and write one folder each under ``out_dir``.

    Folder names: ``NN-<problem name>``. A ``tma_wgmma`` candidate goes through the Hopper flow
    (:func:`synth.flow.hopper.run_hopper`: problem.yaml with ``mainloop: tma_wgmma`` and its pinned
    ``stages`` / ``k_pipe_mmas``, schedule.json, program, certificate, kernel.cu for sm_90a); a split or
    stream-K candidate's problem.yaml has ``split_k: S`` or ``stream_k: true``. Returns the folders written.

    Each folder gets its own ``time_limit`` (seconds, the whole solve of that candidate). A folder whose solve
    runs out of it is not written (nothing of it is left) and the others are still written; then
    :class:`TopIncomplete` is raised after the last one, naming the folders written and those not.
    """
    # here, not at the top: the flow of synth solve loads OR-Tools and Z3, and the search package all its modules;
    # synth's argument parser (every command's, synth run's on a stock GPU image too) imports this module through
    # synth.cli_search
    from ..search.results import progress_or_silent
    from . import pipeline

    say = progress_or_silent(progress)
    cands = result.candidates[:k] if k else result.candidates
    out_dir = os.path.normpath(out_dir)
    for c in cands:  # before anything is written: never a half-written output folder
        if c.cluster != "1x1" and getattr(c.config, "cluster", "1x1") != c.cluster:
            raise SynthError(None, f"candidate #{c.rank} ({c.label}) is a {c.cluster} cluster kernel, and synth "
                             "solve's Hopper problem has no cluster key yet, so its folder cannot be written",
                             "rank without clusters: --no-clusters (docs/search.md, section 10, \"Clusters\")")
    if os.path.exists(out_dir) and os.listdir(out_dir) and not force:
        raise SynthError(Loc(out_dir), f"output folder '{out_dir}' already exists",
                         "pass --force to replace it, or choose another folder with --out")
    written, missing = [], []
    for i, c in enumerate(cands):
        say("write", i, len(cands))
        # a Hopper candidate's config is its HopperGemm (stages and k_pipe_mmas pinned): synth.flow.pipeline.run
        # takes the Hopper flow for it, as synth solve does
        # the cp.async loop with a symbolic trip count, as synth solve reads the folder's problem.yaml back:
        # one kernel for every K (and every split of it), not only this shape's; stream-K needs exactly this (its
        # segments run any number of k-tiles from 1), and the folder's problem.yaml says stream_k: true
        problem = c.config if c.mainloop == "tma_wgmma" else expand_gemm(c.config, min_ktiles=1)
        folder = os.path.join(out_dir, f"{c.rank:02d}-{problem.name}")
        try:
            res = pipeline.run(problem, time_limit=time_limit, workers=workers)
            pipeline.write_outputs(res, folder, force=force)
        except TimeUp as e:  # this folder is not written (write_outputs leaves none half-written); the next ones are
            missing.append((c.rank, folder, e.msg.replace("; nothing was written", "")))
            continue
        written.append(folder)
    say("write", len(cands), len(cands))
    if missing:
        raise TopIncomplete(written, missing, time_limit)
    return written


__all__ = ["TopIncomplete", "write_candidates"]
