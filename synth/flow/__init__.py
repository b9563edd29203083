"""The flows: a problem through every layer below, as ``synth solve`` and ``synth search --top`` run it
(docs/architecture.md).

* :mod:`~synth.flow.pipeline` -- ``synth solve``: an sm_80 problem's dependence graph, CP-SAT schedule,
  lowering, proof and kernel (a Hopper problem goes to :mod:`~synth.flow.hopper`), and the output folder;
* :mod:`~synth.flow.hopper` -- a Hopper GEMM: design, pipeline choice, lowering, every proof its design needs,
  the sm_90a kernel;
* :mod:`~synth.flow.ws` -- a warp-specialized loop body (``kind: attention | gemm_kloop | body``): its schedule,
  and for attention its program and proof;
* :mod:`~synth.flow.design` -- the Hopper design of least predicted time, priced by the search's model;
* :mod:`~synth.flow.candidates` -- the folders of ``synth search --top``, each written by the pipeline.

A flow imports any layer below it (search, front-ends, emit, verify, lower, model, the IR and the base); only
the face (:mod:`synth.cli`, :mod:`synth.api`, :mod:`synth.kernel`, :mod:`synth.run`) imports a flow. This package
imports none of its modules, so ``import synth.flow.design`` loads no more than it needs.
"""
