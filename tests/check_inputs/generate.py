"""Generate the inputs of ``synth check`` with the real compilers, and the table of docs/check.md.

``python tests/check_inputs/generate.py`` compiles every program below with the
compiler that is installed (Triton, TVM, mlir-opt), saves the pipelined IR next to
this file (the saved copies let the tests run where a compiler is absent), runs
``synth check`` on each and prints the per-source table. The tests import the
same functions and compile in the test run.

Programs (our own, modelled on each project's tests of its pipeliner):

* Triton: the tutorial matmul at ``num_stages`` 2..5; a masked K loop that sums
  rows (``tl.range(..., num_stages=3)``); a gather-matmul whose row indices are
  loaded one stage before the rows they select (two loads at different distances);
  an attention loop (K and V tiles, two dots, online softmax).
* TVM: one async producer with its consumer 1..3 stages later; the same with a
  symbolic extent; two producers committed together; two producers interleaved
  with their consumer (the shape of TVM's ``test_async_producer_interleaving``);
  two async stages feeding each other (``test_three_stage_compute_two_stage_async``).
* MLIR: ``transform.memref.multibuffer`` + ``transform.nvgpu.pipeline_shared_memory_copies``
  on a copy loop at depth 2 and 3, and on a two-buffer loop with a peeled epilogue.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

# ------------------------------------------------------------------------------------------ Triton


def triton_available() -> str:
    """'' when Triton can compile here, else why not."""
    try:
        import triton  # noqa: F401
        from triton.backends.compiler import GPUTarget  # noqa: F401
        from triton.compiler import ASTSource  # noqa: F401
    except Exception as e:  # ImportError, or a broken install
        return f"triton is not installed ({type(e).__name__}: {e})"
    return ""


DOCS_CHECK = os.path.join(HERE, "..", "..", "docs", "check.md")
RECIPE_MARK = "<!-- triton-sm80-recipe -->"


def triton_recipe_source(path: str = DOCS_CHECK) -> str:
    """The Python block that follows ``<!-- triton-sm80-recipe -->`` in docs/check.md, verbatim."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    at = text.index(RECIPE_MARK) + len(RECIPE_MARK)
    start = text.index("```python\n", at) + len("```python\n")
    return text[start:text.index("```", start)]


def recipe_constant(name: str):
    """A literal assigned at the top level of the recipe (``MATMUL_SIGNATURE``, ``MATMUL_CONSTEXPRS``),
    read without importing Triton."""
    import ast

    for node in ast.parse(triton_recipe_source()).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [name]:
            return ast.literal_eval(node.value)
    raise KeyError(f"docs/check.md's Triton recipe assigns no {name}")


@functools.lru_cache(maxsize=None)
def triton_recipe():
    """docs/check.md's Triton recipe, executed as a module (``matmul``, ``MATMUL_SIGNATURE``,
    ``MATMUL_CONSTEXPRS``, ``pipelined_ttgir``): the tests compile every Triton program through it.

    Written to a file first: ``triton.jit`` reads its function's source back with ``inspect``."""
    import importlib.util

    import hashlib

    source = triton_recipe_source()
    # one folder per recipe text, reused by every run (and so by Triton's cache); written atomically
    folder = os.path.join(tempfile.gettempdir(),
                          "synth-triton-recipe-" + hashlib.sha256(source.encode()).hexdigest()[:16])
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "triton_sm80_recipe.py")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(source)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location("triton_sm80_recipe", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@functools.lru_cache(maxsize=None)
def triton_kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def masked_rowsum(x_ptr, y_ptr, K, stride, BLOCK_R: tl.constexpr, BLOCK_K: tl.constexpr):
        rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
        cols = tl.arange(0, BLOCK_K)
        acc = tl.zeros((BLOCK_R, BLOCK_K), dtype=tl.float32)
        for k in tl.range(0, K, BLOCK_K, num_stages=3):
            x = tl.load(x_ptr + rows[:, None] * stride + (k + cols)[None, :], mask=(k + cols)[None, :] < K,
                        other=0.0)
            acc += x.to(tl.float32)
        tl.store(y_ptr + rows, tl.sum(acc, axis=1))

    @triton.jit
    def gather_matmul(a_ptr, b_ptr, idx_ptr, c_ptr, K, stride_b, BM: tl.constexpr, BN: tl.constexpr,
                      BK: tl.constexpr):
        rm = tl.arange(0, BM)
        rn = tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K):
            a = tl.load(a_ptr + rm[:, None] * BK * 64 + k * BK + rk[None, :])
            rows = tl.load(idx_ptr + k * BK + rk)
            b = tl.load(b_ptr + rows[:, None] * stride_b + rn[None, :])
            acc = tl.dot(a, b, acc)
        tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)

    @triton.jit
    def attention(q_ptr, k_ptr, v_ptr, o_ptr, N, BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr):
        rm = tl.program_id(0) * BM + tl.arange(0, BM)
        rn = tl.arange(0, BN)
        rd = tl.arange(0, D)
        q = tl.load(q_ptr + rm[:, None] * D + rd[None, :])
        m_i = tl.zeros((BM,), dtype=tl.float32) - float("inf")
        l_i = tl.zeros((BM,), dtype=tl.float32)
        acc = tl.zeros((BM, D), dtype=tl.float32)
        for start in range(0, N, BN):
            kt = tl.load(k_ptr + (start + rn)[None, :] * D + rd[:, None])
            s = tl.dot(q, kt)
            m_new = tl.maximum(m_i, tl.max(s, 1))
            p = tl.exp(s - m_new[:, None])
            alpha = tl.exp(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(v_ptr + (start + rn)[:, None] * D + rd[None, :])
            acc = tl.dot(p.to(tl.float16), v, acc * alpha[:, None])
            m_i = m_new
        tl.store(o_ptr + rm[:, None] * D + rd[None, :], acc / l_i[:, None])

    return {"matmul": triton_recipe().matmul, "masked_rowsum": masked_rowsum, "gather_matmul": gather_matmul,
            "attention": attention}


TRITON_PROGRAMS = {
    # name: (kernel, signature, constexprs, num_stages)
    # the matmul's kernel, signature and constants are the recipe's (docs/check.md)
    **{f"triton-matmul-s{s}": ("matmul", recipe_constant("MATMUL_SIGNATURE"), recipe_constant("MATMUL_CONSTEXPRS"), s)
       for s in (2, 3, 4, 5)},
    "triton-masked-rowsum-s3": ("masked_rowsum", {
        "x_ptr": "*fp16", "y_ptr": "*fp32", "K": "i32", "stride": "i32", "BLOCK_R": "constexpr",
        "BLOCK_K": "constexpr"}, {"BLOCK_R": 32, "BLOCK_K": 64}, 3),
    "triton-gather-matmul-s3": ("gather_matmul", {
        "a_ptr": "*fp16", "b_ptr": "*fp16", "idx_ptr": "*i32", "c_ptr": "*fp32", "K": "i32", "stride_b": "i32",
        "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}, {"BM": 64, "BN": 64, "BK": 32}, 3),
    "triton-attention-s3": ("attention", {
        "q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16", "o_ptr": "*fp32", "N": "i32", "BM": "constexpr",
        "BN": "constexpr", "D": "constexpr"}, {"BM": 64, "BN": 64, "D": 64}, 3),
}


def triton_names() -> list:
    return sorted(TRITON_PROGRAMS)


@functools.lru_cache(maxsize=None)
def triton_ttgir(name: str) -> str:
    """The TTGIR after Triton's pipeliner, compiled for sm_80 (no GPU needed)."""
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    kname, sig, const, stages = TRITON_PROGRAMS[name]
    return triton_recipe().pipelined_ttgir(triton_kernels()[kname], sig, const, stages)


# ------------------------------------------------------------------- Triton, warp-specialized (sm_90)

WS_RECIPE_MARK = "<!-- triton-ws-recipe -->"
WS_DIR = os.path.join(HERE, "triton_ws")
WS_STAGES = (2, 3, 4)
"""``num_stages`` of the saved warp-specialized inputs ``triton_ws/triton_ws_s{N}.ttgir``."""
WS_SM100 = "triton_ws_sm100_s3.ttgir"
"""The same kernel compiled for sm_100 (Blackwell, ``tcgen05``): refused by ``synth check``."""


def triton_ws_recipe_source(path: str = DOCS_CHECK) -> str:
    """The Python block that follows ``<!-- triton-ws-recipe -->`` in docs/check.md, verbatim."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    at = text.index(WS_RECIPE_MARK) + len(WS_RECIPE_MARK)
    start = text.index("```python\n", at) + len("```python\n")
    return text[start:text.index("```", start)]


@functools.lru_cache(maxsize=None)
def triton_ws_recipe():
    """docs/check.md's warp-specialized recipe executed as a module (``matmul_ws``, ``ws_ttgir``); written to
    a file first, as :func:`triton_recipe` does (``triton.jit`` reads its function's source back)."""
    import hashlib
    import importlib.util

    source = triton_ws_recipe_source()
    folder = os.path.join(tempfile.gettempdir(),
                          "synth-triton-ws-recipe-" + hashlib.sha256(source.encode()).hexdigest()[:16])
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "triton_ws_recipe.py")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(source)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location("triton_ws_recipe", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def ws_header(num_stages: int, capability: int = 90) -> str:
    """The first line of a saved warp-specialized input: the Triton version and the call that made it."""
    import triton

    return (f"// Triton {triton.__version__}: ws_ttgir(num_stages={num_stages}, capability={capability}) of "
            "docs/check.md's warp-specialized recipe\n")


@functools.lru_cache(maxsize=None)
def triton_ws_ttgir(num_stages: int, capability: int = 90) -> str:
    """The recipe's TTGIR with :func:`ws_header` as its first line (a comment: the reader skips it)."""
    import warnings

    warnings.filterwarnings("ignore")
    return ws_header(num_stages, capability) + triton_ws_recipe().ws_ttgir(num_stages, capability)


PERSISTENT_DIR = os.path.join(HERE, "triton_persistent")
PERSISTENT_STAGES = (2, 3, 4)
"""``num_stages`` of the saved persistent (flattened) inputs ``triton_persistent/triton_persistent_s{N}.ttgir``."""


@functools.lru_cache(maxsize=None)
def triton_persistent_ttgir(num_stages: int) -> str:
    """The recipe's ``persistent_ttgir`` (Triton's tutorial 09, ``flatten=True``) with the Triton version and
    the call in its first line."""
    import warnings

    import triton

    warnings.filterwarnings("ignore")
    return (f"// Triton {triton.__version__}: persistent_ttgir(num_stages={num_stages}) of docs/check.md's "
            "warp-specialized recipe\n" + triton_ws_recipe().persistent_ttgir(num_stages))


def generate_ws(out_dir: str = WS_DIR) -> list:
    """Compile and save the warp-specialized inputs (sm_90 at :data:`WS_STAGES`, and sm_100) and the persistent
    ones (:data:`PERSISTENT_STAGES`), check them: rows (name, exit status, obligations proven, obligations in
    all, why when refused)."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
    from synth.errors import SynthError
    from synth.frontends import check_file

    os.makedirs(out_dir, exist_ok=True)
    os.makedirs(PERSISTENT_DIR, exist_ok=True)
    rows = []
    jobs = [(os.path.join(out_dir, f"triton_ws_s{s}.ttgir"), functools.partial(triton_ws_ttgir, s, 90))
            for s in WS_STAGES] + [(os.path.join(out_dir, WS_SM100), functools.partial(triton_ws_ttgir, 3, 100))]
    jobs += [(os.path.join(PERSISTENT_DIR, f"triton_persistent_s{s}.ttgir"),
              functools.partial(triton_persistent_ttgir, s)) for s in PERSISTENT_STAGES]
    for path, make in jobs:
        fname = os.path.basename(path)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(make())
        try:
            r = check_file(path)
        except SynthError as e:
            rows.append((fname, 2, 0, 0, str(e).splitlines()[0]))
            continue
        obs = r.report.obligations
        rows.append((fname, 0 if r.ok else 1, sum(o.status == "proven" for o in obs), len(obs), ""))
    return rows


# ---------------------------------------------- Triton sm_90a: tile loops, warp specialization, TMA stores

NESTED_RECIPE_MARK = "<!-- triton-nested-recipe -->"
NESTED_DIR = os.path.join(HERE, "triton_nested")
NESTED_FIXTURES = {
    # file name: (kernel, num_stages, num_warps, warp_specialize, epilogue_subtile)
    # tutorial 09 with flatten=False: a tile loop around the pipelined k-loop, one warp group (8 warps); each
    # tile allocates, initializes and invalidates its barriers; C staged through one reused buffer
    **{f"triton_tiles_s{s}.ttgir": ("matmul_tiles", s, 8, False, False) for s in (2, 3, 4)},
    "triton_tiles_subtile_s3.ttgir": ("matmul_tiles", 3, 8, False, True),
    # the same with warp_specialize=True: the tile loop inside every partition, the stage counter carried
    # across tiles, each consumer storing its half of C by TMA at every tile
    **{f"triton_tiles_ws_s{s}.ttgir": ("matmul_tiles", s, 4, True, False) for s in (2, 3)},
    # one tile per program: the warp-specialized k-loop, then C through a tensor descriptor
    "triton_ws_store_s3.ttgir": ("matmul_ws_store", 3, 4, True, False),
}
"""The saved inputs of docs/check.md, "Tile loops, warp specialization and TMA stores"."""


def triton_nested_recipe_source(path: str = DOCS_CHECK) -> str:
    """The Python block that follows ``<!-- triton-nested-recipe -->`` in docs/check.md, verbatim."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    at = text.index(NESTED_RECIPE_MARK) + len(NESTED_RECIPE_MARK)
    start = text.index("```python\n", at) + len("```python\n")
    return text[start:text.index("```", start)]


@functools.lru_cache(maxsize=None)
def triton_nested_recipe():
    """docs/check.md's tile-loop recipe executed as a module (``matmul_tiles``, ``matmul_ws_store``,
    ``tiles_ttgir``); written to a file first, as :func:`triton_recipe` does."""
    import hashlib
    import importlib.util

    source = triton_nested_recipe_source()
    folder = os.path.join(tempfile.gettempdir(),
                          "synth-triton-nested-recipe-" + hashlib.sha256(source.encode()).hexdigest()[:16])
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "triton_nested_recipe.py")
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(source)
        os.replace(tmp, path)
    spec = importlib.util.spec_from_file_location("triton_nested_recipe", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def nested_header(fname: str) -> str:
    """The first line of a saved tile-loop input: the Triton version and the call that made it."""
    import triton

    kernel, s, w, ws, sub = NESTED_FIXTURES[fname]
    return (f"// Triton {triton.__version__}: tiles_ttgir({kernel}, num_stages={s}, num_warps={w}, "
            f"warp_specialize={ws}, subtile={sub}) of docs/check.md's tile-loop recipe\n")


@functools.lru_cache(maxsize=None)
def triton_nested_ttgir(fname: str) -> str:
    """The recipe's TTGIR for the saved input ``fname`` of :data:`NESTED_FIXTURES`, headed by
    :func:`nested_header` (a comment: the reader skips it)."""
    import warnings

    warnings.filterwarnings("ignore")
    kernel, s, w, ws, sub = NESTED_FIXTURES[fname]
    r = triton_nested_recipe()
    return nested_header(fname) + r.tiles_ttgir(getattr(r, kernel), s, w, ws, sub)


def generate_nested(out_dir: str = NESTED_DIR) -> list:
    """Compile and save :data:`NESTED_FIXTURES`, check each: rows (name, exit status, verdict line)."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
    from synth.errors import SynthError
    from synth.frontends import check_file

    os.makedirs(out_dir, exist_ok=True)
    rows = []
    for fname in NESTED_FIXTURES:
        path = os.path.join(out_dir, fname)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(triton_nested_ttgir(fname))
        try:
            r = check_file(path)
        except SynthError as e:
            rows.append((fname, 2, str(e).splitlines()[0]))
            continue
        rows.append((fname, 0 if r.ok else 1, r.render().splitlines()[0]))
    return rows


# ------------------------------------------------------------------------------------------ TVM


def tvm_available() -> str:
    try:
        import tvm
        import tvm.s_tir  # noqa: F401
        from tvm.script import tirx  # noqa: F401
    except Exception as e:
        return f"apache-tvm (>= 0.27, tvm.s_tir) is not installed ({type(e).__name__}: {e})"
    if not hasattr(tvm.s_tir.transform, "InjectSoftwarePipeline"):
        return "this TVM has no s_tir.transform.InjectSoftwarePipeline"
    return ""


@functools.lru_cache(maxsize=None)
def tvm_funcs():
    from tvm.script import tirx as T

    def stream(stages):
        @T.prim_func(s_tir=True)
        def f(X: T.Buffer((32, 16), "float32"), Y: T.Buffer((32, 16), "float32")):
            for t in T.thread_binding(0, 32, thread="threadIdx.x"):
                for k in T.serial(0, 16, annotations={"software_pipeline_stage": [0, stages],
                                                      "software_pipeline_order": [0, 1],
                                                      "software_pipeline_async_stages": [0]}):
                    with T.sblock("step"):
                        T.reads(X[t, k])
                        T.writes(Y[t, k])
                        S = T.sblock_alloc_buffer((32, 1), dtype="float32", scope="shared")
                        with T.sblock("load"):
                            T.reads(X[t, k])
                            T.writes(S[t, 0])
                            S[t, 0] = X[t, k]
                        with T.sblock("use"):
                            T.reads(S[t, 0])
                            T.writes(Y[t, k])
                            Y[t, k] = S[t, 0] * T.float32(2)
        return f

    def two_inputs(stage, order):
        @T.prim_func(s_tir=True)
        def f(X: T.Buffer((32, 16), "float32"), Z: T.Buffer((32, 16), "float32"),
              Y: T.Buffer((32, 16), "float32")):
            for t in T.thread_binding(0, 32, thread="threadIdx.x"):
                for k in T.serial(0, 16, annotations={"software_pipeline_stage": stage,
                                                      "software_pipeline_order": order,
                                                      "software_pipeline_async_stages": [0]}):
                    with T.sblock("step"):
                        T.reads(X[t, k], Z[t, k])
                        T.writes(Y[t, k])
                        P = T.sblock_alloc_buffer((32, 1), dtype="float32", scope="shared")
                        Q = T.sblock_alloc_buffer((32, 1), dtype="float32", scope="shared")
                        with T.sblock("load_p"):
                            T.reads(X[t, k])
                            T.writes(P[t, 0])
                            P[t, 0] = X[t, k]
                        with T.sblock("load_q"):
                            T.reads(Z[t, k])
                            T.writes(Q[t, 0])
                            Q[t, 0] = Z[t, k]
                        with T.sblock("use"):
                            T.reads(P[t, 0], Q[t, 0])
                            T.writes(Y[t, k])
                            Y[t, k] = P[t, 0] - Q[t, 0]
        return f

    @T.prim_func(s_tir=True)
    def two_async_stages(X: T.Buffer((32, 16), "float32"), Y: T.Buffer((32, 16), "float32")):
        for t in T.thread_binding(0, 32, thread="threadIdx.x"):
            for k in T.serial(0, 16, annotations={"software_pipeline_stage": [0, 1, 2],
                                                  "software_pipeline_order": [0, 1, 2],
                                                  "software_pipeline_async_stages": [0, 1]}):
                with T.sblock("step"):
                    T.reads(X[t, k])
                    T.writes(Y[t, k])
                    S1 = T.sblock_alloc_buffer((32, 1), dtype="float32", scope="shared")
                    S2 = T.sblock_alloc_buffer((32, 1), dtype="float32", scope="shared")
                    with T.sblock("load"):
                        T.reads(X[t, k])
                        T.writes(S1[t, 0])
                        S1[t, 0] = X[t, k]
                    with T.sblock("stage"):
                        T.reads(S1[t, 0])
                        T.writes(S2[t, 0])
                        S2[t, 0] = S1[t, 0] * T.float32(2)
                    with T.sblock("use"):
                        T.reads(S2[t, 0])
                        T.writes(Y[t, k])
                        Y[t, k] = S2[t, 0] + T.float32(1)

    @T.prim_func(s_tir=True)
    def dynamic(x: T.handle, y: T.handle):
        n = T.int32()
        X = T.match_buffer(x, (32, n), "float32")
        Y = T.match_buffer(y, (32, n), "float32")
        for t in T.thread_binding(0, 32, thread="threadIdx.x"):
            for k in T.serial(0, n, annotations={"software_pipeline_stage": [0, 2],
                                                 "software_pipeline_order": [0, 1],
                                                 "software_pipeline_async_stages": [0]}):
                with T.sblock("step"):
                    T.reads(X[t, k])
                    T.writes(Y[t, k])
                    S = T.sblock_alloc_buffer((32, 1), dtype="float32", scope="shared")
                    with T.sblock("load"):
                        T.reads(X[t, k])
                        T.writes(S[t, 0])
                        S[t, 0] = X[t, k]
                    with T.sblock("use"):
                        T.reads(S[t, 0])
                        T.writes(Y[t, k])
                        Y[t, k] = S[t, 0] + T.float32(1)

    return {"tvm-stream-s1": stream(1), "tvm-stream-s2": stream(2), "tvm-stream-s3": stream(3),
            "tvm-dynamic-s2": dynamic,
            "tvm-two-inputs-together": two_inputs([0, 0, 1], [0, 1, 2]),
            "tvm-producer-interleaving": two_inputs([0, 0, 3], [0, 2, 1]),
            "tvm-two-async-stages": two_async_stages}


def tvm_names() -> list:
    return ["tvm-stream-s1", "tvm-stream-s2", "tvm-stream-s3", "tvm-dynamic-s2", "tvm-two-inputs-together",
            "tvm-producer-interleaving", "tvm-two-async-stages"]


@functools.lru_cache(maxsize=None)
def tvm_module(name: str):
    """The IRModule after InjectSoftwarePipeline."""
    import tvm

    f = tvm_funcs()[name]
    mod = tvm.IRModule.from_expr(f.with_attr("global_symbol", "main"))
    return tvm.s_tir.transform.InjectSoftwarePipeline()(mod)


def tvm_script(name: str) -> str:
    return tvm_module(name).script()


# ------------------------------------------------------------------------------------------ MLIR


def mlir_opt() -> str | None:
    """``$MLIR_OPT``, ``mlir-opt`` on PATH, or the newest ``/usr/lib/llvm-*/bin/mlir-opt``."""
    found = os.environ.get("MLIR_OPT") or shutil.which("mlir-opt")
    if found:
        return found
    installed = sorted(glob.glob("/usr/lib/llvm-*/bin/mlir-opt"),
                       key=lambda p: int(p.split("llvm-")[1].split("/")[0]))
    return installed[-1] if installed else None


_COPY_LOOP = """
func.func @stream(%global: memref<1024xf32>, %out: memref<1024xf32>) {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1024 = arith.constant 1024 : index
  %shared = memref.alloc() : memref<4xf32, #gpu.address_space<workgroup>>
  scf.for %i = %c0 to %c1024 step %c4 {
    %t = nvgpu.device_async_copy %global[%i], %shared[%c0], 4 : memref<1024xf32> to memref<4xf32, #gpu.address_space<workgroup>>
    %g = nvgpu.device_async_create_group %t
    nvgpu.device_async_wait %g
    %v = memref.load %shared[%c0] : memref<4xf32, #gpu.address_space<workgroup>>
    memref.store %v, %out[%i] : memref<1024xf32>
  }
  return
}
"""

_TWO_BUFFERS = """
func.func @two(%a: memref<4096xf32>, %b: memref<4096xf32>, %out: memref<4096xf32>) {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1024 = arith.constant 1024 : index
  %sa = memref.alloc() : memref<4xf32, #gpu.address_space<workgroup>>
  %sb = memref.alloc() : memref<4xf32, #gpu.address_space<workgroup>>
  scf.for %i = %c0 to %c1024 step %c4 {
    %t1 = nvgpu.device_async_copy %a[%i], %sa[%c0], 4 : memref<4096xf32> to memref<4xf32, #gpu.address_space<workgroup>>
    %t2 = nvgpu.device_async_copy %b[%i], %sb[%c0], 4 : memref<4096xf32> to memref<4xf32, #gpu.address_space<workgroup>>
    %g = nvgpu.device_async_create_group %t1, %t2
    nvgpu.device_async_wait %g
    %x = memref.load %sa[%c0] : memref<4xf32, #gpu.address_space<workgroup>>
    %y = memref.load %sb[%c0] : memref<4xf32, #gpu.address_space<workgroup>>
    %z = arith.addf %x, %y : f32
    memref.store %z, %out[%i] : memref<4096xf32>
  }
  return
}
"""

_SCHEDULE = """
module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op {transform.readonly}) {
    %alloc = transform.structured.match ops{["memref.alloc"]} in %root : (!transform.any_op) -> !transform.op<"memref.alloc">
    %mb = transform.memref.multibuffer %alloc {factor = FACTOR : i64, skip_analysis} : (!transform.op<"memref.alloc">) -> !transform.any_op
    %for = transform.structured.match ops{["scf.for"]} in %root : (!transform.any_op) -> !transform.op<"scf.for">
    %new = transform.nvgpu.pipeline_shared_memory_copies failures(propagate) %for {depth = DEPTH PEEL} : (!transform.op<"scf.for">) -> !transform.any_op
    transform.yield
  }
}
"""

MLIR_PROGRAMS = {
    "mlir-copy-depth2": (_COPY_LOOP, 2, 2, False),
    "mlir-copy-depth3": (_COPY_LOOP, 3, 3, False),
    "mlir-two-buffers-depth2-peeled": (_TWO_BUFFERS, 2, 2, True),
}


def mlir_names() -> list:
    return sorted(MLIR_PROGRAMS)


def mlir_input(name: str) -> str:
    """The loop plus the transform script that multi-buffers and pipelines it."""
    loop, factor, depth, peel = MLIR_PROGRAMS[name]
    sched = _SCHEDULE.replace("FACTOR", str(factor)).replace("DEPTH", str(depth)).replace(
        " PEEL", ", peel_epilogue" if peel else "")
    return loop + sched


@functools.lru_cache(maxsize=None)
def mlir_pipelined(name: str) -> str:
    """``mlir-opt --transform-interpreter`` output; raises RuntimeError when mlir-opt fails."""
    tool = mlir_opt()
    if tool is None:
        raise RuntimeError("mlir-opt not found")
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, f"{name}.mlir")
        with open(src, "w", encoding="utf-8") as fh:
            fh.write(mlir_input(name))
        run = subprocess.run([tool, "--transform-interpreter", src], capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        raise RuntimeError(run.stderr.strip()[:2000])
    return run.stdout


# ------------------------------------------------------------------------------------------ table


def generate(out_dir: str = HERE) -> list:
    """Compile what can be compiled here, save it, check it: rows (source, name, counts, file)."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
    from synth.frontends import check_file

    rows = []
    jobs = []
    if not triton_available():
        jobs += [("Triton", n, f"{n}.ttgir", functools.partial(triton_ttgir, n)) for n in triton_names()]
    if not tvm_available():
        jobs += [("TVM", n, f"{n}.py", functools.partial(tvm_script, n)) for n in tvm_names()]
    if mlir_opt():
        jobs += [("MLIR", n, f"{n}.mlir", functools.partial(mlir_pipelined, n)) for n in mlir_names()]
    for source, name, fname, make in jobs:
        path = os.path.join(out_dir, fname)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(make())
        r = check_file(path)
        c = dict(r.counts(), races=len([o for o in r.report.global_failures if o.status == "refuted"]))
        rows.append((source, name, c, os.path.relpath(path, os.path.dirname(os.path.dirname(HERE)))))
    return rows


def main() -> None:
    rows = generate()
    print("| source | program | waits | proven | refuted | unknown | races no wait guards |")
    print("|---|---|---|---|---|---|---|")
    for source, name, c, _ in rows:
        n = c["proven"] + c["refuted"] + c["unknown"]
        print(f"| {source} | {name} | {n} | {c['proven']} | {c['refuted']} | {c['unknown']} | {c['races']} |")
    print()
    print("| source | programs | waits proven | refuted | unknown | programs with a race no wait guards |")
    print("|---|---|---|---|---|---|")
    for source in ("Triton", "TVM", "MLIR"):
        mine = [c for s, _, c, _ in rows if s == source]
        if mine:
            print(f"| {source} | {len(mine)} | {sum(c['proven'] for c in mine)} | "
                  f"{sum(c['refuted'] for c in mine)} | {sum(c['unknown'] for c in mine)} | "
                  f"{sum(1 for c in mine if c['races'])} |")


if __name__ == "__main__":
    main()
    if not triton_available():
        print()
        print("| warp-specialized / persistent input | exit | obligations proven | obligations |")
        print("|---|---|---|---|")
        for fname, rc, ok, n, why in generate_ws():
            print(f"| {fname} | {rc} | {ok} | {n} |" + (f" {why}" if why else ""))
        print()
        print("| tile-loop / TMA-store input | exit | verdict |")
        print("|---|---|---|")
        for fname, rc, line in generate_nested():
            print(f"| {fname} | {rc} | {line} |")
