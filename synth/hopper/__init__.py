"""Hopper (sm_90a) pipelines: TMA loads completing on mbarrier phases, wgmma groups, warp roles.

:mod:`.ir` holds the program (:class:`~.ir.HopperProgram`: barriers, setup, roles, teardown);
the lowering is :mod:`synth.lower.barriers`, the proofs :mod:`synth.verify.phases`, the oracle
:mod:`synth.verify.oracle_phases`. docs/hopper.md is the contract.
"""
