"""Proofs of wait counts (docs/verification.md): obligations, Z3 proofs, certificates, an explicit-state oracle.

The CLI calls exactly :func:`verify_program`, :func:`load_program`,
:func:`write_certificate` and :func:`certify`. Modules:

* :mod:`~synth.verify.load` -- reading ``program.json`` (the trusted reader's checks first).
* :mod:`~synth.verify.obligations` -- what must hold, per statement, charged to a wait.
* :mod:`~synth.verify.encode` -- the Z3 encoding (module docstring: what is
  quantified, what is assumed).
* :mod:`~synth.verify.prove` -- one timed query per obligation, counterexamples, tightness.
* :mod:`~synth.verify.oracle` -- the same verdicts by running the program (no solver).
* :mod:`~synth.verify.certificate` -- SMT-LIB2 files of the trusted checker (:mod:`synth.trusted`),
  bound to ``program.json``, and their re-check.
* :mod:`~synth.verify.report` -- result types and their plain-text rendering.
"""

from .certificate import CertifyResult, certify, write_certificate
from .load import load_program
from .prove import verify_program
from .report import Counterexample, ObligationResult, Report, WaitVerdict

__all__ = ["verify_program", "load_program", "write_certificate", "certify", "Report", "WaitVerdict",
           "ObligationResult", "Counterexample", "CertifyResult"]
