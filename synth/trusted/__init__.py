"""The trusted checker: what ``synth certify`` believes, kept small and apart from the rest of synth.

From the bytes of ``program.json`` alone it derives every proof obligation and
its SMT-LIB2 formula, and checks a certificate against them with Z3 and cvc5
(docs/trust.md: what is trusted, what is derived, what is checked).

* :mod:`~synth.trusted.expr` -- the expression language, printed as SMT-LIB2 terms;
* :mod:`~synth.trusted.program` -- reading: bounds, the JSON Schema, semantic checks;
* :mod:`~synth.trusted.obligations` -- the obligations and their files;
* :mod:`~synth.trusted.solvers` -- Z3 and cvc5 on one text;
* :mod:`~synth.trusted.certify` -- checking a certificate folder;
* :mod:`~synth.trusted.check` -- verdicts of a program (no certificate);
* :mod:`~synth.trusted.hopper_program`, :mod:`~synth.trusted.hopper` -- Hopper programs
  (``"protocol": "mbarrier"``): a strict reader and an independent encoding of every
  obligation class, asked of Z3 and cvc5 (what ``synth certify`` adds to a Hopper certificate);
* :mod:`~synth.trusted.attention` -- attention programs (``n >= 0`` KV blocks): the barrier program, each
  consumer's register program in the ``cp.async`` form and the once-loaded buffer's reads, derived from the bytes,
  their obligations and certificate (:func:`~synth.trusted.certify.certify_attention` checks one);
* :mod:`~synth.trusted.flags` -- the design keys of an output folder's ``problem.yaml``, read with PyYAML's
  pure-Python parser (which proofs the folder must hold).

No module here imports anything from synth outside this package; the tests check that.
"""
