"""Hopper (sm_90a) pipelines: TMA loads completing on mbarrier phases, wgmma groups, warp roles.

This package is the IR layer of Hopper (docs/architecture.md): :mod:`.ir` holds the program
(:class:`~.ir.HopperProgram`: barriers, setup, roles, teardown), :mod:`.problem` the problem reader,
:mod:`.design` the design value, :mod:`.loop` the main loop and its pipeline choice. The lowering is
:mod:`synth.lower.barriers` (and the programs a design adds, :mod:`synth.lower.hopper_persistent`,
:mod:`synth.lower.hopper_pingpong`, :mod:`synth.lower.hopper_store`), the proofs :mod:`synth.verify.phases`
(and :mod:`synth.verify.hopper_cluster`, ``hopper_persistent``, ``hopper_pingpong``, ``hopper_store``), the
oracle :mod:`synth.verify.oracle_phases`, the flow of ``synth solve`` :mod:`synth.flow.hopper`.
docs/hopper.md is the contract.
"""
