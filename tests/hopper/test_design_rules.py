"""Each Hopper design rule is stated once, by the design (synth/hopper/kernel_design.py: ``Issue(key, message, rule,
fix=...)``), and the problem reader (synth/hopper/problem.py) refuses a file with the design's first issue at the
line of its key, with that Issue's message and fix (docs/architecture.md, "The design value").

A problem file breaking each rule exits 2 from ``python -m synth solve`` with the file, the key's line, the message
and the fix; a file breaking two rules shows which one is reported; the reader's source compares no bound of the
kernel and words no rule's message.
"""

from __future__ import annotations

import ast
import json
import pathlib

import pytest

from conftest import ROOT
from conftest import synth_cli as synth
from synth.errors import SynthError
from synth.hopper.kernel_design import Issue, KernelDesign
from synth.load import load_problem

ORDER = ("name", "kind", "shape", "dtype", "tile", "arch", "mainloop", "warps", "stages", "k_pipe_mmas", "split_k",
         "persistent", "epilogue", "pingpong", "out_dtype", "activation", "cluster", "target")
BASE = {"name": "g", "kind": "gemm", "shape": "{M: 256, N: 256, K: 512}", "arch": "sm_90", "mainloop": "tma_wgmma"}


def shape(N: int = 256, K: int = 512) -> str:
    return f"{{M: 256, N: {N}, K: {K}}}"


def tile(BM: int = 128, BN: int = 128, BK: int = 64) -> str:
    return f"{{BM: {BM}, BN: {BN}, BK: {BK}}}"


def problem_text(keys: dict) -> str:
    """A Hopper problem file: :data:`BASE` with ``keys`` added or replaced, one key a line in :data:`ORDER`."""
    d = {**BASE, **keys}
    return "".join(f"{k}: {d[k]}\n" for k in ORDER if k in d)


def line_of(text: str, key: str) -> int:
    """The line of the problem file's top-level key ``key`` (``tile.BM``: the ``tile`` line)."""
    top = key.split(".")[0] + ":"
    return next(n for n, ln in enumerate(text.splitlines(), 1) if ln.startswith(top))


# (id, keys of the problem file, the key refused, a fragment of the message, a fragment of the fix, the other key
# the message names with its line, or None)
RULES = [
    ("tile.BK", {"tile": tile(BK=32)}, "tile.BK", "tile.BK 32: the Hopper main loop loads k-tiles of 64 elements",
     "use BK: 64, or mainloop: cp_async", None),
    ("tile.BM", {"tile": tile(BM=96)}, "tile.BM",
     "tile.BM 96: the Hopper kernel has one consumer warp group per 64 rows", "use BM: 64 or BM: 128", None),
    ("tile.BN", {"tile": tile(BN=24)}, "tile.BN", "tile.BN 24: wgmma's N and the TMA box take a multiple of 16",
     "any multiple of 16 up to 256", None),
    ("warps", {"tile": tile(BM=64), "warps": 12}, "warps", "warps 12: the Hopper kernel runs one producer warp group "
     "and 1 consumer warp group(s) for BM 64, 8 warps", "write warps: 8", None),
    ("warps-ping-pong", {"tile": tile(BM=64), "pingpong": "true", "warps": 8}, "warps", "warps 8: the Hopper kernel "
     "runs one producer warp group and two ping-pong consumer warp groups (pingpong: true at line", "write warps: 12",
     "pingpong"),
    ("out_dtype-auto-epilogue-split", {"out_dtype": "f16", "epilogue": "auto", "split_k": 2}, "out_dtype",
     "out_dtype f16: C is stored as f16 or bf16 by the TMA-store epilogue only", "add epilogue: tma_store", None),
    ("warps-no-auto-value", {"tile": tile(BM=64), "pingpong": "auto", "warps": 12}, "warps",
     "warps 12: the Hopper kernel runs one producer warp group and 1 consumer warp group(s) for BM 64, 8 warps",
     "write warps: 8", None),
    ("k_pipe_mmas<stages", {"stages": 4, "k_pipe_mmas": 4}, "k_pipe_mmas",
     "k_pipe_mmas 4 with 4 stages: a consumer holding as many groups as there are slots starves the producer",
     "use k_pipe_mmas below 4, or auto", None),
    ("tma-16B", {"shape": shape(K=500)}, "shape", "shape.K 500: TMA needs the row stride of A and B (2 K bytes)",
     "use K a multiple of 8", None),
    ("split-k-tiles", {"split_k": 9}, "split_k", "split_k = 9 exceeds the 8 k-tiles of K = 512 / BK = 64",
     "use split_k at most 8", None),
    ("persistent-split", {"persistent": "true", "split_k": 2}, "persistent",
     "persistent tiles with split_k = 2 are not built", "remove persistent:, or use split_k: 1", None),
    ("cluster-split", {"cluster": "2x1", "split_k": 2}, "cluster", "cluster 2x1 with split_k = 2 (split_k: 2 at line",
     "use split_k: 1, or use cluster: 1x1", "split_k"),
    ("tma-store-split", {"epilogue": "tma_store", "split_k": 2}, "epilogue",
     "a TMA-store epilogue with split_k = 2 is not built", "remove epilogue:, or use split_k: 1", None),
    ("ping-pong-split", {"pingpong": "true", "split_k": 2}, "pingpong", "ping-pong with split_k = 2 is not built",
     "remove pingpong:, or use split_k: 1", None),
    ("ping-pong", {"pingpong": "true", "persistent": "false"}, "persistent",
     "ping-pong consumers take a persistent CTA's tiles in turn", "write persistent: true", None),
    ("cluster-ping-pong", {"cluster": "1x2", "pingpong": "true"}, "cluster",
     "cluster 1x2 with ping-pong consumers (pingpong: true at line", "remove pingpong:, or use cluster: 1x1",
     "pingpong"),
    ("accumulators", {"pingpong": "true", "tile": tile(128, 256)}, "pingpong",
     "ping-pong consumers each hold a whole 128x256 tile: 256 accumulators per thread, above 128",
     "use BN <= 128 with BM 128, or BM 64", None),
    ("out_dtype-tma-store", {"out_dtype": "f16"}, "out_dtype",
     "out_dtype f16: C is stored as f16 or bf16 by the TMA-store epilogue only", "add epilogue: tma_store", None),
    ("tma-store-16B", {"epilogue": "tma_store", "shape": shape(N=250)}, "shape",
     "shape.N 250: a TMA store needs C's row stride (4 N bytes) to be a multiple of 16",
     "use N a multiple of 4, or epilogue: register", None),
    ("tma-store-16B-f16", {"epilogue": "tma_store", "out_dtype": "bf16", "shape": shape(N=252)}, "shape",
     "shape.N 252: a TMA store of bf16 needs C's row stride (2 N bytes) to be a multiple of 16",
     "use N a multiple of 8, or out_dtype: f32", None),
    ("one-stage", {"target": "{shared_bytes: 30000}"}, "target.shared_bytes",
     "one stage needs 33808 B of shared memory, above the 30000 B allowed", "raise target.shared_bytes", None),
    ("shared-memory", {"stages": 8, "tile": tile(128, 256)}, "stages",
     "8 stages need 394368 B of shared memory, above the 232448 B allowed", "use at most 4 stages, or auto", None),
    ("shared-memory-staging", {"stages": 7, "k_pipe_mmas": 1, "epilogue": "tma_store"}, "stages",
     "7 stages need 263280 B of shared memory (with the TMA-store staging buffers)", "use at most 6 stages", None),
    ("cluster-auto-split", {"cluster": "auto", "split_k": 2}, "cluster",
     "cluster: auto with split_k = 2: a cluster kernel has no split-K", "remove cluster:, or use split_k: 1", None),
]


@pytest.mark.parametrize("keys, key, message, fix, other", [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_a_file_breaking_a_rule_exits_2_at_the_keys_line_with_the_message_and_the_fix(tmp_path, keys, key, message,
                                                                                      fix, other):
    text = problem_text(keys)
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    r = synth("solve", p, "-o", tmp_path / "out", "-q")
    assert r.returncode == 2, r.stdout + r.stderr
    head, *rest = r.stderr.splitlines()
    assert head.startswith(f"{p}:{line_of(text, key)}:") and ": error: " in head, r.stderr
    assert message in head, r.stderr
    if other is not None:
        assert f"({other}: " in head and f"at line {line_of(text, other)})" in head, r.stderr
    assert rest[-1].startswith("fix: ") and fix in rest[-1], r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "out").exists()


def _refusal(tmp_path, keys: dict) -> tuple[SynthError, str]:
    text = problem_text(keys)
    p = tmp_path / "p.yaml"
    p.write_text(text)
    with pytest.raises(SynthError) as e:
        load_problem(str(p))
    return e.value, text


def test_the_reader_reports_the_designs_own_issue(tmp_path):
    """The message and the fix a file is refused with are the design's issue, word for word."""
    for keys, design in (({"tile": tile(BM=96)}, KernelDesign.of(bm=96)),
                         ({"pingpong": "true", "persistent": "true", "tile": tile(128, 256)},
                          KernelDesign.of(pingpong=True, persistent=True, bn=256)),
                         ({"epilogue": "tma_store", "split_k": 2}, KernelDesign.of(epilogue="tma_store", split_k=2))):
        err, _ = _refusal(tmp_path, keys)
        issue = design.issues()[0]
        assert (err.msg, err.fix) == (issue.message, issue.fix)
        with pytest.raises(ValueError) as e:
            design.check()
        assert str(e.value) == issue.message


# (id, keys breaking two rules, the key reported, a fragment of its message): the design's order (main loop, scheduler,
# the rules joining parts, epilogue, shared memory, each shape rule after its part), an issue at a key the file does
# not state (absent, auto, implied) or joined to an auto key after the others; warps: once the tile has no issue;
# values that cannot be read before any rule.
TWO = [
    ("tile-before-tile", {"tile": tile(96, 24)}, "tile.BM", "tile.BM 96"),
    ("tile-before-shape", {"tile": tile(BM=96), "shape": shape(K=500)}, "tile.BM", "tile.BM 96"),
    ("tile-before-warps", {"tile": tile(BM=96), "warps": 12}, "tile.BM", "tile.BM 96"),
    ("warps-before-accumulators", {"warps": 8, "pingpong": "true", "tile": tile(128, 256)}, "warps", "warps 8"),
    ("warps-before-shared-memory", {"warps": 8, "stages": 8, "tile": tile(128, 256)}, "warps", "warps 8"),
    ("pipeline-before-shape", {"stages": 4, "k_pipe_mmas": 4, "shape": shape(K=500)}, "k_pipe_mmas", "k_pipe_mmas 4"),
    ("shape-K-before-accumulators", {"pingpong": "true", "tile": tile(128, 256), "shape": shape(K=500)}, "shape",
     "shape.K 500"),
    ("k-tiles-before-persistent", {"split_k": 9, "persistent": "true"}, "split_k", "exceeds the 8 k-tiles"),
    ("persistent-before-tma-store", {"persistent": "true", "split_k": 2, "epilogue": "tma_store"}, "persistent",
     "persistent tiles with split_k = 2"),
    ("stated-persistent-first", {"pingpong": "true", "persistent": "true", "split_k": 2}, "persistent",
     "persistent tiles with split_k = 2"),
    ("implied-persistent-last", {"pingpong": "true", "split_k": 2}, "pingpong", "ping-pong with split_k = 2"),
    ("auto-persistent-last", {"pingpong": "true", "persistent": "auto", "split_k": 2}, "pingpong",
     "ping-pong with split_k = 2"),
    ("tma-store-split-before-ping-pong", {"epilogue": "tma_store", "split_k": 2, "pingpong": "true"}, "epilogue",
     "a TMA-store epilogue with split_k = 2"),
    ("accumulators-before-split", {"pingpong": "true", "split_k": 2, "tile": tile(128, 256)}, "pingpong",
     "256 accumulators"),
    ("accumulators-before-shape-N", {"epilogue": "tma_store", "shape": shape(N=250), "pingpong": "true",
                                     "tile": tile(128, 256)}, "pingpong", "256 accumulators"),
    ("cluster-split-before-tma-store", {"cluster": "2x1", "split_k": 2, "epilogue": "tma_store"}, "cluster",
     "cluster 2x1 with split_k = 2"),
    ("out_dtype-before-shape", {"out_dtype": "f16", "shape": shape(N=252)}, "out_dtype", "out_dtype f16"),
    ("auto-epilogue-out_dtype-last", {"out_dtype": "f16", "epilogue": "auto", "shape": shape(N=252)}, "shape",
     "shape.N 252: a TMA store of f16"),
    ("one-stage-before-stages", {"target": "{shared_bytes: 30000}", "stages": 8}, "target.shared_bytes",
     "one stage needs"),
    ("reading-before-rules", {"tile": tile(BM=96), "epilogue": "foo"}, "epilogue", "epilogue 'foo'"),
    ("auto-before-rules", {"cluster": "auto", "split_k": 2, "persistent": "true"}, "cluster", "cluster: auto"),
]


@pytest.mark.parametrize("keys, key, message", [r[1:] for r in TWO], ids=[r[0] for r in TWO])
def test_a_file_breaking_two_rules_is_refused_for_the_first(tmp_path, keys, key, message):
    err, text = _refusal(tmp_path, keys)
    assert err.loc.line == line_of(text, key) and message in err.msg, err.render()


def test_rules_left_to_synth_are_not_refused(tmp_path):
    """``stages`` / ``k_pipe_mmas`` and the design keys left ``auto`` are chosen later: what they would decide is
    not refused (a pinned stages count's shared memory is, whatever ``k_pipe_mmas`` is)."""
    for keys in ({"stages": "auto", "k_pipe_mmas": 3}, {"stages": 6, "k_pipe_mmas": "auto"},
                 {"pingpong": "auto", "tile": tile(128, 256)}, {"epilogue": "auto", "shape": shape(N=250)},
                 {"cluster": "2x1", "pingpong": "auto"}, {"target": "{shared_bytes: 40000}", "epilogue": "auto"},
                 {"out_dtype": "bf16", "epilogue": "auto"}, {"tile": tile(BM=64), "pingpong": "auto", "persistent": "auto", "warps": 12}):
        p = tmp_path / "p.yaml"
        p.write_text(problem_text(keys))
        load_problem(str(p))
    err, text = _refusal(tmp_path, {"stages": 8, "tile": tile(128, 256)})
    assert err.loc.line == line_of(text, "stages") and "8 stages need" in err.msg


def test_an_issue_names_the_line_of_the_other_key_it_joins():
    i = Issue("cluster", "cluster 2x1 with split_k = 2 (split_k: 2) is not built", fix="use split_k: 1",
              other="split_k")
    assert i.text(7) == "cluster 2x1 with split_k = 2 (split_k: 2 at line 7) is not built"
    assert i.text(None) == i.message == Issue("cluster", i.message, fix="f").text(7)


# ---------------------------------------------------------------------------------------------------------------
# stated once
# ---------------------------------------------------------------------------------------------------------------

READER = ROOT / "synth" / "hopper" / "problem.py"
DESIGN = ROOT / "synth" / "hopper" / "kernel_design.py"
BOUNDS = {"BM_CHOICES", "MAX_ACC_REGS", "SMEM_LIMIT", "ALIGN_PAD", "BARRIER_BYTES", "BK", "MAX_STAGING",
          "WARP_GROUP_THREADS"}
"""The kernel's bounds (synth/hopper/kernel_design.py): the design compares them, the reader never does."""
DERIVED = {"smem_bytes", "max_stages", "fixed_smem_bytes", "stage_bytes", "staging_bytes", "accumulators",
           "row_blocks", "out_bytes", "store_cols", "trip_count"}
"""What the design computes from its knobs."""


def reading_functions(source: str) -> list[ast.FunctionDef]:
    """``hopper_gemm_from_doc`` and the module's private helpers (what reads a problem file)."""
    tree = ast.parse(source)
    return [f for f in tree.body if isinstance(f, ast.FunctionDef)
            and (f.name == "hopper_gemm_from_doc" or f.name.startswith("_"))]


def restated_bounds(source: str) -> list[str]:
    """Where the reading functions of ``source`` restate a rule of the design: a remainder (an alignment rule), or
    a comparison of a kernel bound, of what the design derives, or of a number above 1."""
    out = []
    for f in reading_functions(source):
        for node in ast.walk(f):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
                out.append(f"{f.name}:{node.lineno}: remainder")
            if isinstance(node, ast.Compare) and any(
                    isinstance(sub, ast.Name) and sub.id in BOUNDS or
                    isinstance(sub, ast.Attribute) and sub.attr in DERIVED or
                    isinstance(sub, ast.Constant) and type(sub.value) is int and sub.value > 1
                    for sub in ast.walk(node)):
                out.append(f"{f.name}:{node.lineno}: {ast.unparse(node)}")
    return out


def test_the_reader_compares_no_bound_of_the_kernel():
    assert restated_bounds(READER.read_text()) == []
    # the check sees a restated rule: the reader's own statement of the tile, shared memory and alignment rules
    restated = '''
def _tile(tdims, g, dims):
    if tdims["BM"] not in BM_CHOICES or tdims["BN"] % 16:
        pass
    if g.max_stages() < 1 or tdims["BM"] * tdims["BN"] // 128 > 128:
        pass
'''
    assert len(restated_bounds(restated)) == 4


def strings(path: pathlib.Path) -> str:
    """Every string literal of a module (adjacent literals joined, an f-string's values left out), one a line."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.JoinedStr):
            out.append("".join(v.value for v in node.values if isinstance(v, ast.Constant)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append(node.value)
    return "\n".join(out)


DESIGN_WORDS = ["the Hopper main loop loads k-tiles of", "the Hopper kernel has one consumer warp group per 64 rows",
                "wgmma's N and the TMA box take a multiple of 16", "a consumer holding as many groups as there are "
                "slots starves the producer", ": TMA needs the row stride of A and B", "a split would get no k-tile",
                "are not built: a persistent CTA computes whole tiles", "a cluster kernel's CTA pair computes whole "
                "tiles", "is not built: the split's last CTA sums the partials", "is not built: the consumers take "
                "whole tiles of a persistent CTA", "ping-pong consumers take a persistent CTA's tiles in turn",
                "accumulators per thread, above", "C is stored as f16 or bf16 by the TMA-store epilogue only",
                "needs C's row stride (", "B of shared memory, above the", "the shared operand's"]
"""Words of each rule's message, as the design writes them."""


@pytest.mark.parametrize("words", DESIGN_WORDS)
def test_each_rule_is_worded_by_the_design_alone(words):
    assert words in strings(DESIGN) and words not in strings(READER)


# ---------------------------------------------------------------------------------------------------------------
# the kernel's warps and an auto key's values: what synth solve builds
# ---------------------------------------------------------------------------------------------------------------


def _solve(tmp_path, keys: dict, name: str = "p") -> tuple[dict, pathlib.Path]:
    """``synth solve --no-verify --json`` of the problem file of ``keys`` in a fresh interpreter: the JSON result and
    the output folder (exit 0 asserted)."""
    p = tmp_path / f"{name}.yaml"
    p.write_text(problem_text(keys))
    out = tmp_path / f"{name}-out"
    r = synth("solve", p, "-o", out, "--no-verify", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)["result"], out


def test_ping_pong_warps_are_the_kernels_own(tmp_path):
    """``warps:`` is compared with the design's count: a ping-pong kernel of BM 64 runs 12 warps (a producer warp
    group and two consumers), so ``warps: 12`` is accepted and launches 384 threads; ``warps: 8`` is refused (the
    first RULES row ``warps-ping-pong``)."""
    res, out = _solve(tmp_path, {"tile": tile(BM=64, BN=64), "pingpong": "true", "warps": 12})
    assert res["design"]["pingpong"] is True, res["design"]
    assert "#define SYNTH_THREADS 384\n" in (out / "kernel.cu").read_text()
    assert "warps: 12\n" in (out / "problem.yaml").read_text()
    load_problem(str(out / "problem.yaml"))  # the folder's file reads back


@pytest.mark.slow  # two solves; the warps rule's refusal is in the quick tier's table
def test_a_warps_pin_bounds_the_designs_synth_chooses(tmp_path):
    """With ``pingpong: auto``, ``warps:`` keeps synth to the designs of that many warps: 12 with BM 64 is a
    ping-pong kernel, 8 a cooperative one; the folder's ``problem.yaml`` reads back either way."""
    auto = {"tile": tile(BM=64, BN=64), "persistent": "auto", "pingpong": "auto"}
    for warps, pingpong in ((12, True), (8, False)):
        res, out = _solve(tmp_path, {**auto, "warps": warps}, f"w{warps}")
        assert res["design"]["pingpong"] is pingpong, (warps, res["design"])
        g = load_problem(str(out / "problem.yaml"))
        assert g.pingpong is pingpong and g.warps == warps


@pytest.mark.parametrize("out_dtype", ["f16", "bf16"])
def test_an_f16_c_with_epilogue_auto_is_stored_by_the_tma_store(tmp_path, out_dtype):
    """``epilogue: auto`` chooses among the epilogues that build: an f16 or bf16 C is stored by the TMA-store epilogue
    only (docs/hopper_design.md), so that is synth's choice and the folder says so."""
    res, out = _solve(tmp_path, {"out_dtype": out_dtype, "epilogue": "auto"})
    assert res["design"]["epilogue"] == "tma_store", res["design"]
    text = (out / "problem.yaml").read_text()
    assert "epilogue: tma_store  # chosen by synth solve" in text and f"out_dtype: {out_dtype}\n" in text, text
    assert (out / "store").is_dir()
    g = load_problem(str(out / "problem.yaml"))
    assert (g.epilogue, g.out_dtype) == ("tma_store", out_dtype)


# ---------------------------------------------------------------------------------------------------------------
# the search states none of the split rules, nor the tile's BK
# ---------------------------------------------------------------------------------------------------------------

SEARCH = ROOT / "synth" / "search"
SEARCH_RULE_FUNCTIONS = {"hopper.py": ("is_legal_hopper", "hopper_split_issue"),
                         "hopper_search.py": ("rank_hopper_references",)}
"""The search's functions that refuse a split point or a reference tile: each asks the design (``k_tile_issues``,
``issues()``, the main loop's tile.BK issue)."""
DESIGN_KNOBS = {"persistent", "pingpong", "epilogue", "cluster", "BK", "bk"}
"""Knobs a restated split or tile rule tests (a split with persistent, ping-pong, the TMA store, a cluster; BK 64)."""
SEARCH_WORDS = ["a split would get no k-tile", "a persistent CTA computes whole tiles",
                "the split's last CTA sums the partials", "a cluster kernel's CTA pair computes whole tiles",
                "the Hopper main loop loads k-tiles of", "bk must be", "is not built (KernelDesign.check)",
                "needs C's row stride (", "is not a multiple of 4 (C's row stride"]
"""The design's words for these rules (and the TMA store's row stride, which ``why`` names), and the search's own
former wording of some of them."""


def restated_search_rules(source: str, names: tuple) -> list[str]:
    """Where the functions ``names`` of ``source`` restate a split or tile rule (``function:line``, once a line): a
    k-tile count (a floor division), or a test (``if``, a comparison, ``and`` / ``or``) of a design knob of
    :data:`DESIGN_KNOBS`."""
    out: list[str] = []
    for f in ast.parse(source).body:
        if not (isinstance(f, ast.FunctionDef) and f.name in names):
            continue
        tests = [n.test for n in ast.walk(f) if isinstance(n, (ast.If, ast.IfExp, ast.While))]
        tests += [n for n in ast.walk(f) if isinstance(n, (ast.Compare, ast.BoolOp))]
        for node in ast.walk(f):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.FloorDiv):
                out.append(f"{f.name}:{node.lineno}")
        for t in tests:
            if any(isinstance(sub, ast.Attribute) and sub.attr in DESIGN_KNOBS for sub in ast.walk(t)):
                out.append(f"{f.name}:{t.lineno}")
    return sorted(set(out))


@pytest.mark.parametrize("module", sorted(SEARCH_RULE_FUNCTIONS))
def test_the_search_restates_no_split_or_tile_rule(module):
    source = (SEARCH / module).read_text()
    assert restated_search_rules(source, SEARCH_RULE_FUNCTIONS[module]) == []
    assert {f.name for f in ast.parse(source).body if isinstance(f, ast.FunctionDef)} >= set(
        SEARCH_RULE_FUNCTIONS[module])
    # the check sees the rules as the search once stated them itself
    restated = '''
def hopper_split_issue(ctx, p):
    T = -(-ctx.K // BK)
    if p.split_k > T:
        return "exceeds"

def is_legal_hopper(ctx, p):
    if p.persistent or p.pingpong:
        return "persistent"
    if p.epilogue == "tma_store":
        return "tma-store"

def rank_hopper_references(ctx, entries, best, winner):
    if ref.BK != p.BK:
        why = "bk"
'''
    assert len(restated_search_rules(restated, ("hopper_split_issue", "is_legal_hopper", "rank_hopper_references"))) == 4


@pytest.mark.parametrize("words", SEARCH_WORDS)
def test_the_search_words_no_split_or_tile_rule(words):
    for path in sorted(SEARCH.glob("*.py")):
        assert words not in strings(path), path
