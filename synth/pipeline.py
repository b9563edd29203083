"""``synth.pipeline`` is :mod:`synth.flow.pipeline` (the flow of ``synth solve``), under the name docs/api.md and
docs/outputs.md give it: ``synth.pipeline.Result``, ``synth.pipeline.run``, ``synth.pipeline.check_lowered``.

This module replaces itself with that one in ``sys.modules``, so both names are one module object (an attribute
set on either is seen by both).
"""

import sys

from .flow import pipeline as _pipeline

sys.modules[__name__] = _pipeline
