"""Proofs of wait counts (SPEC §3): obligations, Z3 proofs, certificates, an explicit-state oracle.

The CLI calls exactly :func:`verify_program`, :func:`load_program`,
:func:`write_certificate` and :func:`certify`. Modules:

* :mod:`~synth.verify.obligations` -- what must hold, per statement, charged to a wait;
  ``program.json`` reading and validation.
* :mod:`~synth.verify.encode` -- the Z3 encoding (module docstring: what is
  quantified, what is assumed).
* :mod:`~synth.verify.prove` -- one timed query per obligation, counterexamples, tightness.
* :mod:`~synth.verify.oracle` -- the same verdicts by running the program (no solver).
* :mod:`~synth.verify.certificate` -- SMT-LIB2 files and their independent re-check.
* :mod:`~synth.verify.report` -- result types and their plain-text rendering.
"""

from .certificate import CertifyResult, certify, write_certificate
from .obligations import load_program
from .prove import verify_program
from .report import Counterexample, ObligationResult, Report, WaitVerdict

__all__ = ["verify_program", "load_program", "write_certificate", "certify", "Report", "WaitVerdict",
           "ObligationResult", "Counterexample", "CertifyResult"]
