"""Documented bounds on everything a problem file can make large (docs/bounds.md).

The loader (:mod:`synth.load`, :mod:`synth.gemm_doc`, :mod:`synth.yamlnodes`)
rejects a value outside its bound with exit status 2, naming the bound. The
bounds are far above any real GPU loop, and low enough that every later stage
stays fast and exact:

* every number fits a CP-SAT (64-bit) model with room to spare, and the
  II scans of the model and the simulator are bounded by the latencies;
* ``max_stage`` bounds the heuristic schedule loop and the stage domains;
* ``MAX_TRIP_COUNT`` keeps the per-iteration tables of the lowering small
  (the simulator replays a bounded window of iterations, see :mod:`synth.sim`);
* a GEMM's ``M``, ``N``, ``K`` keep the CUDA grid within ``gridDim.y <= 65535``
  and every size within ``int``.

Each constant's docstring is the reason; :data:`TABLE` lists them for the docs
and tests.
"""

from __future__ import annotations

MAX_INPUT_BYTES = 1 << 18
"""Size of a problem file (256 KiB; real ones are a few KiB, a thousand ops about 80 KiB)."""
MAX_YAML_DEPTH = 32
"""Nesting of YAML mappings and lists (a problem file needs 4)."""
MAX_YAML_NODES = 50_000
"""YAML nodes after expanding aliases and merge keys (stops alias bombs)."""
MAX_INT_DIGITS = 24
"""Digits of an integer literal (a larger one is out of every bound anyway)."""
MAX_STRING = 4096
"""Characters of one string value (``description``, ``when``)."""

MAX_OPS = 1000
"""Ops in a loop body."""
MAX_BUFFERS = 1000
"""Buffers."""
MAX_UNITS = 64
"""Units of the target."""
MAX_DEPS = 10_000
"""Explicit ``deps:`` entries."""
MAX_EDGES = 100_000
"""Dependence edges the buffers make (every reader of a buffer depends on every writer):
a thousand ops that all read and write one buffer would make two million."""

MAX_LATENCY = 100_000
"""Cycles from issue to result of an op (``latency``, a dep's ``latency``)."""
MAX_ISSUE = 100_000
"""Cycles an op occupies its unit (``issue``)."""
MAX_UNIT_COUNT = 64
"""Ops a unit runs at once (``count``)."""
MAX_BYTES = 1 << 24
"""Bytes of a buffer, ``shared_bytes`` and ``registers_bytes`` (16 MiB)."""
MAX_TRIP_COUNT = 1 << 16
"""``trip_count`` and ``min_trip_count`` (65536; a GEMM with K = 10^6 and BK = 16 has 62500
k-tiles). The lowering tabulates a static loop's wait counts per iteration, so this keeps it
within seconds; a longer loop can be written with a symbolic trip count."""
MAX_STAGE = 63
"""``schedule.max_stage``, every pinned stage and async stage (64 stages)."""
MAX_DISTANCE = 64
"""Iteration distance of an explicit dep."""
MAX_WEIGHT = 1000
"""Weight of an objective term."""

MAX_GEMM_DIM = 1_000_000
"""``shape.M``, ``shape.N``, ``shape.K`` of a ``kind: gemm`` problem."""
MAX_TILE_MN = 256
"""``tile.BM`` and ``tile.BN``."""
MAX_TILE_K = 128
"""``tile.BK``."""
MAX_GEMM_STAGES = MAX_STAGE + 1
"""``stages`` of a ``kind: gemm`` problem."""
MAX_SPLIT_K = 64
"""``split_k`` of a ``kind: gemm`` problem (``gridDim.z`` of the kernel; also at most the k-tile count)."""

MAX_EXPR_TOKENS = 256
"""Tokens of one expression (``when:``, wait counts in ``program.json``)."""
MAX_EXPR_DEPTH = 32
"""Nesting of parentheses, unary operators and ``?:`` in one expression."""

MAX_SEARCH_TOP = 16
"""``synth search gemm --top K``: folders written (each one is solved, proved and emitted: seconds apiece)."""
MAX_SHAPES = 1024
"""Shapes in a ``synth search gemm --shapes`` CSV file (each is a whole search)."""
MAX_SHAPES_BYTES = 1 << 20
"""Size of a ``--shapes`` CSV file (1 MiB)."""
MAX_CHECK_UNROLL = 1024
"""``synth check`` of TVMScript: iterations of the constant-extent loops run out around the pipelined loop
(its unrolled prologue and epilogue: ``stages - 1`` iterations each, at most 63 for 64 stages), counted
over the prologue and over the epilogue. The pipelined loop itself is proved symbolically, at any extent."""

TABLE: tuple[tuple[str, str, str], ...] = (
    ("problem file size", "<= 256 KiB", "MAX_INPUT_BYTES"),
    ("YAML nesting depth", f"<= {MAX_YAML_DEPTH}", "MAX_YAML_DEPTH"),
    ("YAML nodes after aliases/merge keys", f"<= {MAX_YAML_NODES}", "MAX_YAML_NODES"),
    ("digits of an integer", f"<= {MAX_INT_DIGITS}", "MAX_INT_DIGITS"),
    ("characters of a string value", f"<= {MAX_STRING}", "MAX_STRING"),
    ("ops", f"1 .. {MAX_OPS}", "MAX_OPS"),
    ("buffers", f"1 .. {MAX_BUFFERS}", "MAX_BUFFERS"),
    ("units", f"1 .. {MAX_UNITS}", "MAX_UNITS"),
    ("deps", f"0 .. {MAX_DEPS}", "MAX_DEPS"),
    ("dependence edges", f"<= {MAX_EDGES}", "MAX_EDGES"),
    ("latency (op, dep)", f"0 .. {MAX_LATENCY}", "MAX_LATENCY"),
    ("issue", f"1 .. {MAX_ISSUE}", "MAX_ISSUE"),
    ("unit count", f"1 .. {MAX_UNIT_COUNT}", "MAX_UNIT_COUNT"),
    ("bytes, shared_bytes, registers_bytes", f"bytes 1 .. {MAX_BYTES}, capacities 0 .. {MAX_BYTES}",
     "MAX_BYTES"),
    ("trip_count, min_trip_count", f"1 .. {MAX_TRIP_COUNT}", "MAX_TRIP_COUNT"),
    ("max_stage, pinned stages, async_stages", f"0 .. {MAX_STAGE}", "MAX_STAGE"),
    ("dep distance", f"0 .. {MAX_DISTANCE}", "MAX_DISTANCE"),
    ("objective weight", f"0 .. {MAX_WEIGHT}", "MAX_WEIGHT"),
    ("gemm shape M, N, K", f"1 .. {MAX_GEMM_DIM}", "MAX_GEMM_DIM"),
    ("gemm tile BM, BN", f"16 .. {MAX_TILE_MN}", "MAX_TILE_MN"),
    ("gemm tile BK", f"16 .. {MAX_TILE_K}", "MAX_TILE_K"),
    ("gemm stages", f"1 .. {MAX_GEMM_STAGES}", "MAX_GEMM_STAGES"),
    ("gemm split_k", f"1 .. {MAX_SPLIT_K}", "MAX_SPLIT_K"),
    ("expression tokens", f"<= {MAX_EXPR_TOKENS}", "MAX_EXPR_TOKENS"),
    ("expression nesting", f"<= {MAX_EXPR_DEPTH}", "MAX_EXPR_DEPTH"),
    ("search --top", f"1 .. {MAX_SEARCH_TOP}", "MAX_SEARCH_TOP"),
    ("search --shapes rows", f"1 .. {MAX_SHAPES}", "MAX_SHAPES"),
    ("search --shapes file size", "<= 1 MiB", "MAX_SHAPES_BYTES"),
    ("check: TVMScript prologue and epilogue loop iterations", f"<= {MAX_CHECK_UNROLL}", "MAX_CHECK_UNROLL"),
)
"""(what, range, constant) for docs/bounds.md; a test keeps the two in sync."""
