"""FlashAttention forward from the command line (docs/attention.md, "From the command line"): ``synth solve`` of a
``kind: attention`` file writes kernel.cu (from the proven program, with the file's ``causal:`` and ``dtype:``) and
the steady-state timeline; ``synth verify`` re-emits kernel.cu; ``synth.kernel.load(OUT)`` gives a callable
``(q, k, v) -> o`` that checks its arguments and runs the kernel on the emulator or, through CUDA Python (the fake
driver of tests/test_run.py here), on a GPU; a tampered kernel.cu is refused."""

from __future__ import annotations

import hashlib
import json
import re
import shutil

import numpy as np
import pytest

from conftest import ROOT, synth_cli
from gemm_fixtures import NEEDS_GXX
from test_light_runtime import HEAVY, run_stock

import synth.kernel
from synth.emit.sm90.emulate_attention import reference
from synth.errors import SynthError

WS = ROOT / "problems" / "ws"
CAUSAL_D128 = (WS / "attention-d128-f16.yaml").read_text() + "causal: true\n"
BF16_D64 = (WS / "attention-d64-f16.yaml").read_text().replace("dtype: f16", "dtype: bf16").replace(
    "name: attention-fwd-d64-f16", "name: attention-fwd-d64-bf16")


@pytest.fixture(scope="module")
def causal(solve_once):
    """The head-dim-128 f16 body with the causal mask, solved and proven once (``--json``)."""
    return solve_once(CAUSAL_D128, "--json")


@pytest.fixture(scope="module")
def bf16(solve_once):
    """The head-dim-64 bf16 body (three consumer warp groups), no mask, solved without the proof (quicker; the
    kernel is emitted from the unproven program as the GEMM flow does)."""
    return solve_once(BF16_D64, "--no-verify")


def copy(folder, dst):
    shutil.copytree(folder, dst)
    return dst


def rewrite_manifest(folder, name: str) -> None:
    """Record ``name``'s current sha256 in the folder's manifest (as someone hiding an edit would)."""
    marker = folder / ".synth-output.json"
    m = json.loads(marker.read_text())
    m["files"][name] = hashlib.sha256((folder / name).read_bytes()).hexdigest()
    marker.write_text(json.dumps(m))


def inputs(shape_q, shape_k, seed=0, dtype=np.float16):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(s).astype(dtype) for s in (shape_q, shape_k, shape_k))


# ---- synth solve


def test_solve_writes_the_kernel_and_the_timeline(causal):
    from synth.emit.sm90.attention_kernel import emit_attention_kernel
    from synth.flow.ws import load_ws_output

    out, res = causal.out, causal.result
    names = ["kernel.cu", "problem.yaml", "program.json", "program.txt", "schedule.json", "timeline.png",
             "timeline.svg", "verify.txt"]
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == names
    assert res["files"] == names and res["verified"] is True
    assert [p["name"] for p in res["phases"]] == ["load", "schedule", "lower", "prove", "emit", "write"]
    manifest = json.loads((out / ".synth-output.json").read_text())["files"]
    assert set(manifest) == set(names)  # the manifest covers the kernel and the pictures
    # kernel.cu is the kernel of the proven program with the file's mask
    o = load_ws_output(out)
    text = (out / "kernel.cu").read_text()
    assert text == emit_attention_kernel(o.attention, o.problem.body, o.schedule, causal=True, dtype="f16")
    assert "#define SYNTH_ATTN_CAUSAL 1" in text and "#define SYNTH_ATTN_BF16 0" in text
    # the timeline: one lane per warp group, the ops of consecutive KV blocks by unit
    svg = (out / "timeline.svg").read_text()
    for word in ("producer: TMA", "consumer 0: wgmma", "consumer 1: softmax", "qk j", "exp2 j", "pv j", "MUFU",
                 "staggered consumers (ping-pong)"):
        assert word in svg, word
    assert (out / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_timeline_places_each_consumer_at_its_offset(causal):
    """Consumer w runs every op of KV block j at ``start + j II + offset_w``; the window starts past the fill."""
    from synth.emit.timeline_ws import WINDOW_IIS, instances, lanes, window
    from synth.flow.ws import load_ws_output

    s = load_ws_output(causal.out).schedule
    assert lanes(s) == ["producer", "consumer 0", "consumer 1"]
    got = instances(s, range(3, 5))
    qk = next(o for o in s.ops if o.name == "qk")
    for w in (0, 1):
        starts = [a for lane, op, _, j, a, _ in got if lane == f"consumer {w}" and op == "qk" and j == 4]
        assert starts == [qk.start + 4 * s.ii + s.offsets[w]]
    loads = {(op, j) for lane, op, unit, j, _, _ in got if lane == "producer"}
    assert loads == {("load_K", 3), ("load_V", 3), ("load_K", 4), ("load_V", 4)}
    blocked = {f"wait {o.name}" for o in s.ops if o.wait_start is not None and o.wait_end > o.wait_start}
    assert {op for _, op, *_ in got if op.startswith("wait ")} == blocked
    first, t0, t1 = window(s)
    assert first == max(o.stage for o in s.ops) + 1 and t1 - t0 == WINDOW_IIS * s.ii


def test_a_body_the_kernel_does_not_take_gets_a_note(monkeypatch):
    """A proven program the kernel is not written for: no kernel.cu, the reason in the summary."""
    from synth.deadline import Deadline
    from synth.flow import ws

    def refuse(*a, **kw):
        raise ValueError("BN 80: the kernel takes a multiple of 64 in 64..256")

    monkeypatch.setattr(ws, "emit_attention_kernel", refuse)
    r = ws.run_ws(ws.load_solve_problem(str(WS / "attention-d128-f16.yaml")), deadline=Deadline.after(120),
                  verify=False)
    assert r.kernel is None and "BN 80" in r.kernel_note and "kernel.cu" not in ws.output_files(r)
    assert any("no kernel.cu" in line for line in ws.summary_lines(r))


@pytest.mark.parametrize("line, words", [
    ("causal: maybe", ["'causal' of the attention body must be true or false, not 'maybe'", "causal: true"]),
    ("causal: 1", ["must be true or false, not 1"]),
    ("dtype: f32", ["'dtype' of the attention body is 'f32', not one of f16, bf16"]),
])
def test_a_bad_causal_or_dtype_exits_2_at_its_line(tmp_path, line, words):
    src = (WS / "attention-d128-f16.yaml").read_text()
    key = line.split(":")[0]
    text = "\n".join(ln for ln in src.splitlines() if not ln.startswith(key + ":")) + f"\n{line}\n"
    (tmp_path / "p.yaml").write_text(text)
    r = synth_cli("solve", tmp_path / "p.yaml", "-o", tmp_path / "out", cwd=tmp_path)
    lineno = text.splitlines().index(line) + 1
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith(f"{tmp_path / 'p.yaml'}:{lineno}:"), r.stderr
    assert all(w in r.stderr for w in words) and "fix:" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_causal_belongs_to_attention_only(tmp_path):
    text = (WS / "gemm-kloop-128x256x64-f16.yaml").read_text() + "causal: true\n"
    (tmp_path / "p.yaml").write_text(text)
    r = synth_cli("solve", tmp_path / "p.yaml", "-o", tmp_path / "out", cwd=tmp_path)
    assert r.returncode == 2 and "'causal' does not belong to kind: gemm_kloop" in r.stderr, r.stderr


# ---- synth verify, certify


def test_verify_re_emits_the_kernel(causal, tmp_path):
    r = synth_cli("verify", causal.out, cwd=tmp_path)
    assert r.returncode == 0 and "kernel.cu is the kernel synth emits from it" in r.stdout, r.stdout + r.stderr
    edited = copy(causal.out, tmp_path / "edited")
    text = (edited / "kernel.cu").read_text()
    lines = text.split("\n")
    k = next(i for i, ln in enumerate(lines) if "synth_wgmma_wait_n<1>" in ln)
    (edited / "kernel.cu").write_text(text.replace("synth_wgmma_wait_n<1>", "synth_wgmma_wait_n<0>", 1))
    r = synth_cli("verify", edited, cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith(f"{edited / 'kernel.cu'}:{k + 1}:1: error: kernel.cu is not the kernel synth emits "
                               "from program.json with problem.yaml's causal: true and dtype: f16"), r.stderr
    assert "fix: re-run 'synth solve'" in r.stderr


# ---- synth.kernel.load


@NEEDS_GXX
def test_load_runs_on_the_emulator_at_odd_lengths(causal):
    kern = synth.kernel.load(str(causal.out), backend="emulator")
    assert isinstance(kern, synth.emit.sm90.attention_runtime.AttentionKernel)
    assert "head dim 128, 128x128 tiles, f16, causal, 2 consumer warp groups" in repr(kern)
    q, k, v = inputs((1, 2, 130, 128), (1, 2, 77, 128), seed=3)
    o = kern(q, k, v)
    assert o.dtype == np.float32 and o.shape == q.shape
    ref = reference(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32), causal=True,
                    scale=1 / np.sqrt(128))
    assert np.all(np.abs(o - ref) <= 1e-2 * (1 + np.abs(ref)))
    assert np.all(o[:, :, :130 - 77] == 0)  # rows that see no key (bottom-right aligned mask)
    o2 = kern(q, k, v, causal=True, scale=0.5)
    ref2 = reference(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32), causal=True, scale=0.5)
    assert np.all(np.abs(o2 - ref2) <= 1e-2 * (1 + np.abs(ref2)))
    assert kern.last_info["ctas"] == 2 * 2


@pytest.mark.slow  # a second solve (head dim 64, bf16); the quick tier runs bf16 kernels in test_attention_kernel
@NEEDS_GXX
def test_bf16_inputs_as_floats_bits_or_ml_dtypes(bf16):
    from synth.emit.sm90.emulate import bf16_bits, bf16_value

    kern = synth.kernel.load(str(bf16.out), backend="emulator")
    assert kern.facts.dtype == "bf16" and kern.facts.threads == 512 and not kern.facts.causal
    q, k, v = inputs((2, 1, 70, 64), (2, 1, 200, 64), seed=4, dtype=np.float32)
    bits = [bf16_bits(x) for x in (q, k, v)]
    o = kern(q, k, v)  # float32 values, rounded to bfloat16
    assert np.array_equal(o, kern(*bits))  # the same bits
    vals = [bf16_value(b) for b in bits]
    ref = reference(*vals, causal=False, scale=1 / 8)
    assert np.all(np.abs(o - ref) <= 4e-2 * (1 + np.abs(ref)))
    ml = pytest.importorskip("ml_dtypes")
    assert np.array_equal(o, kern(*(b.view(ml.bfloat16) for b in bits)))


def test_arguments_are_checked_before_any_launch(causal):
    kern = synth.kernel.load(str(causal.out), backend="emulator")
    q, k, v = inputs((1, 1, 10, 128), (1, 1, 20, 128))
    cases = [
        ((q.astype(np.float32), k, v), {}, "q has dtype float32; this kernel reads float16", "astype(np.float16)"),
        ((q[0], k, v), {}, "q has 3 dimension(s)", "reshape"),
        ((q, k, v[:, :, :5]), {}, "k is (1, 1, 20, 128) but v is (1, 1, 5, 128)", "v with k's shape"),
        ((q, np.concatenate([k, k], 1), np.concatenate([v, v], 1)), {}, "batch and heads differ", "repeat"),
        ((q[..., :64], k[..., :64], v[..., :64]), {}, "head dim 64: this kernel was emitted for head dim 128",
         "head_dim: 64"),
        ((q[:, :, :0], k, v), {}, "must be >= 1", "non-empty"),
        ((q, k, v), {"causal": False}, "causal=False, but this kernel was emitted with causal: true", "causal: false"),
        ((q, k, v), {"scale": float("nan")}, "scale = nan is not finite", "finite"),
        ((q.tolist(), k, v), {}, "q is a list, not a numpy array", "np.asarray"),
        ((np.zeros((70000, 1, 1, 128), np.float16), k[:1], v[:1]), {}, "batch and heads differ", "repeat"),
        ((np.zeros((70000, 1, 1, 128), np.float16),) + tuple(np.zeros((70000, 1, 1, 128), np.float16)
                                                            for _ in range(2)), {}, "batch x heads = 70000", "split"),
    ]
    for args, kw, msg, fix in cases:
        with pytest.raises(synth.kernel.KernelError) as e:
            kern(*args, **kw)
        assert msg in e.value.msg and fix in e.value.fix, (msg, e.value.msg, e.value.fix)
        assert isinstance(e.value, ValueError) and e.value.loc.file.endswith("kernel.cu")
    q0 = q.copy()
    kern.check(q, k, v, causal=True, scale=2)  # accepted, the inputs untouched
    assert np.array_equal(q, q0)


def test_a_tampered_folder_is_refused_by_load(causal, tmp_path):
    edited = copy(causal.out, tmp_path / "edited")
    (edited / "kernel.cu").write_text((edited / "kernel.cu").read_text() + "// edited\n")
    with pytest.raises(SynthError, match="kernel.cu changed since synth wrote it"):
        synth.kernel.load(str(edited), backend="emulator")
    # the manifest rewritten too: kernel.cu's mask no longer problem.yaml's
    hidden = copy(causal.out, tmp_path / "hidden")
    (hidden / "kernel.cu").write_text((hidden / "kernel.cu").read_text().replace(
        "#define SYNTH_ATTN_CAUSAL 1", "#define SYNTH_ATTN_CAUSAL 0"))
    rewrite_manifest(hidden, "kernel.cu")
    with pytest.raises(SynthError, match="kernel.cu states SYNTH_ATTN_CAUSAL 0, problem.yaml asks for 1"):
        synth.kernel.load(str(hidden), backend="emulator")
    gone = copy(causal.out, tmp_path / "gone")
    (gone / "kernel.cu").unlink()
    with pytest.raises(SynthError, match="has no kernel.cu: 'synth solve' writes one for a proven") as e:
        synth.kernel.load(str(gone), backend="emulator")
    assert "re-run 'synth solve'" in e.value.fix


@NEEDS_GXX
def test_the_cuda_backend_through_the_fake_driver(causal, monkeypatch):
    """The cuda backend through CUDA Python (tests/test_run.py's fake driver: the launch decoded by the kernel's own
    signature, run on the emulator): tensor maps of Q, K, V, the grid (Q tiles, batch x heads), the kernel's threads
    and shared memory, the precompiled image first; every buffer freed."""
    from synth.emit.sm90 import runner
    from test_run import FakeDriver

    drv = FakeDriver((causal.out / "kernel.cu").read_text())
    monkeypatch.setattr(runner, "driver", lambda: drv)
    kern = synth.kernel.load(str(causal.out), backend="cuda", images=[("bad image", b"bad"), ("sm_90a cubin", b"CUBIN")])
    assert kern.backend == "cuda"
    q, k, v = inputs((2, 1, 200, 128), (2, 1, 130, 128), seed=5)
    o = kern(q, k, v)
    ref = reference(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32), causal=True,
                    scale=1 / np.sqrt(128))
    assert np.all(np.abs(o - ref) <= 1e-2 * (1 + np.abs(ref)))
    (launch,) = drv.launches
    f = kern.facts
    assert launch["grid"] == (2, 2, 1) and launch["block"] == (f.threads, 1, 1) and launch["smem"] == f.smem_bytes
    assert [t["box"] for t in drv.tmaps.values()] == [[64, 128], [64, 128], [64, 128]]
    assert [t["dims"] for t in drv.tmaps.values()] == [[128, 400], [128, 260], [128, 260]]
    assert launch["vals"]["seqlen_q"] == 200 and launch["vals"]["seqlen_k"] == 130
    assert drv.loaded == [b"CUBIN"] and not drv.mem
    with kern.prepare(q, k, v, scale=0.25) as job:  # gpu_check's path: run, fetch, time
        job.run()
        o2, status = job.fetch()
        assert status == 0 and job.registers == 128 and job.time_ms(3) == [0.5] * 3
    assert not drv.mem


def test_cuda_without_a_gpu_is_refused(causal, monkeypatch):
    from synth.emit.sm90 import runner

    monkeypatch.setattr(runner, "gpu_status", lambda: (False, "no driver here"))
    with pytest.raises(SynthError, match="no sm_90 GPU available: no driver here"):
        synth.kernel.load(str(causal.out), backend="cuda")


LOAD_AND_RUN = r'''
import json, sys, numpy as np, synth.kernel
from synth.emit.sm90.emulate_attention import reference
kern = synth.kernel.load(sys.argv[1])
rng = np.random.default_rng(1)
q = rng.standard_normal((1, 1, 90, 128)).astype(np.float16)
k = rng.standard_normal((1, 1, 150, 128)).astype(np.float16)
v = rng.standard_normal((1, 1, 150, 128)).astype(np.float16)
o = kern(q, k, v)
ref = reference(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32), causal=True, scale=128 ** -0.5)
print(json.dumps({"backend": kern.backend, "err": float(np.abs(o - ref).max())}))
'''


@NEEDS_GXX
def test_the_light_runtime_runs_an_attention_folder(causal, tmp_path):
    """synth.kernel.load and the call on a stock GPU image's imports: no OR-Tools, Z3 or matplotlib."""
    proc, got = run_stock(LOAD_AND_RUN, tmp_path, str(causal.out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["backend"] == "emulator" and res["err"] < 1e-2
    assert not HEAVY & set(got["modules"]), got["modules"]


def test_the_runtime_names_the_kernel_as_the_emitter_does():
    from synth.emit.sm90 import attention_kernel, attention_runtime

    assert attention_runtime.KERNEL == attention_kernel.KERNEL
    src = (ROOT / "synth" / "emit" / "runtime" / "attn_harness.cpp").read_text()
    assert re.search(rf"\b{attention_runtime.KERNEL}\(", src)


def test_synth_run_names_what_runs_an_attention_folder(causal, tmp_path):
    """synth run times a GEMM folder against cuBLAS; an attention folder is refused with exit 2 naming the callable
    and the GPU check (no traceback)."""
    r = synth_cli("run", causal.out, cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "holds an attention kernel" in r.stderr and "synth.kernel.load(OUT)(q, k, v)" in r.stderr, r.stderr
