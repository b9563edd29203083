#!/usr/bin/env python3
"""One GPU check of synth's kernels: packed here, run on a lent GPU in one call (docs/gpu.md).

``python benchmarks/gpu_check.py prepare DIR`` (no GPU needed; the full synth install: CP-SAT, Z3)
solves and writes the folders to run, precompiles each kernel.cu with nvcc (sm_80 kernels: cubins for
sm_80 and sm_90 and compute_80 PTX; the sm_90a kernel: an sm_90a cubin and compute_90a PTX) and writes
``DIR/manifest.json`` (every file's sha256); at most :data:`MAX_PACK_BYTES`. Each folder is solved and proved
within ``--time-limit`` seconds (default :data:`TIME_LIMIT`; ``--only NAME ...`` picks folders), one line per step
printed; a folder that fails is left out, named with its reason in the manifest's ``not_built``, and the others are
packed (exit 1; ``run`` reports it NOT BUILT); exit 2 for a DIR that cannot be a pack or an unknown name.

The pack also holds FlashAttention-forward folders (``kind: attention``, :data:`ATTENTION`: head dim 128 f16 without
and with the causal mask, head dim 64 f16; each with its sm_90a cubin). Their run checks O against torch's
``scaled_dot_product_attention`` (numpy's float64 softmax attention without torch) at odd lengths, one key, more
rows than keys under the mask and more batch x heads than SMs, and times the kernel against torch SDPA's flash
backend in the same process (TFLOP/s = ``4 B H Sq Sk d``, halved under the causal mask; FlashAttention's count) at
``B = 16384 / S``, ``H = 2048 / d`` for S = 1024 and 4096 (FlashAttention's benchmark sizing).

``python benchmarks/gpu_check.py run DIR`` on the GPU machine (stdlib, numpy, PyYAML, torch and CUDA
Python only: synth's light runtime, :mod:`synth.kernel`; no solver, no pycuda): for every GEMM folder,

1. correctness against torch's f32 product (TF32 off) at odd shapes (M and N off the tile grid, K below
   ``stages x BK``, K = 8, one tile, more tiles than SMs) and at 4096^3 and 8192^3; a K the kernel was not
   proved for must be refused (that is a pass);
2. TFLOP/s against cuBLAS (``torch.matmul``, f16 in and out, f32 accumulation) in the same process: the
   median of at least 20 launches each, warm (back to back) and with L2 flushed before every launch
   (a 256 MiB buffer written), the SM clock read before and after (``nvidia-smi`` when present, else the
   CUDA attribute: the maximum clock);
3. one launch of each kernel under ``compute-sanitizer --tool racecheck`` and ``--tool synccheck`` at a
   small shape, where the tool is present (this script re-run on one folder: ``one DIR NAME M N K``).

``DIR/report.json`` and ``DIR/report.md`` are rewritten after every step (a crash leaves the partial
report, ``"status": "running"``), one line per kernel is printed, the phases are budgeted to finish
within ``--budget`` seconds (default 330: under 6 minutes on an H100; what does not fit is skipped and
the report says so), and the exit status is 1 when any result is wrong (a sanitizer error included) or a folder
checked was not built, 2 for a pack that is missing, edited or not this script's and for nothing to check (no
folders, ``--only`` naming none of the pack's), else 0.

``run DIR --backend emulator`` runs the same steps on synth's CPU emulator at small shapes (CI: the pack
and this script are exercised on every run, under a stock GPU image's imports); without torch the
reference is numpy's float64 product, and the report says so.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

import numpy as np  # noqa: E402

PACK_FORMAT = "synth-gpu-pack/1"
REPORT_FORMAT = "synth-gpu-report/1"
MAX_PACK_BYTES = 20 << 20
"""A pack larger than 20 MiB is refused by ``prepare`` (it travels with the working tree)."""
MAX_MANIFEST_BYTES = 1 << 20
FLUSH_BYTES = 256 << 20
"""The buffer written between flushed launches: larger than any L2 (H100: 50 MiB, H200: 60 MiB)."""
LAUNCHES = 20
"""Timed launches per measurement (the median is reported)."""
ATOL, RTOL = 1e-2, 1e-2
"""f16 inputs in [-1, 1), f32 accumulation: |C - ref| <= ATOL + RTOL |ref| (summation order differs)."""
BIG = (4096, 8192)
SANITIZER_TOOLS = ("racecheck", "synccheck")
SANITIZER_RESERVE = 90.0
"""Seconds of the budget kept for the sanitizer runs (they run at once, in child processes)."""


def _gemm(name: str, tile: str, warps: int, stages: int, extra: str = "", shape: int = 4096) -> tuple[str, str]:
    return name, (f"name: {name}\nkind: gemm\nshape: {{M: {shape}, N: {shape}, K: {shape}}}\ndtype: f16\n"
                  f"tile: {tile}\nwarps: {warps}\nstages: {stages}\narch: sm_80\n{extra}")


HOPPER_DEFAULT = ("h90-128x128x64", "name: h90-128x128x64\nkind: gemm\nshape: {M: 4096, N: 4096, K: 4096}\n"
                  "dtype: f16\ntile: {BM: 128, BN: 128, BK: 64}\narch: sm_90\nmainloop: tma_wgmma\n"
                  "stages: auto\nk_pipe_mmas: auto\n")
DESIGNS = (
    _gemm("s80-128x128x32-s3", "{BM: 128, BN: 128, BK: 32}", 8, 3),
    _gemm("s80-128x128x32-s4", "{BM: 128, BN: 128, BK: 32}", 8, 4),
    _gemm("s80-128x256x64-s3", "{BM: 128, BN: 256, BK: 64}", 8, 3),
    _gemm("s80-128x128x32-s3-splitk2", "{BM: 128, BN: 128, BK: 32}", 8, 3, "split_k: 2\n"),
    _gemm("s80-128x128x32-s3-streamk", "{BM: 128, BN: 128, BK: 32}", 8, 3, "stream_k: true\n"),
    HOPPER_DEFAULT,
    (HOPPER_DEFAULT[0] + "-splitk2", HOPPER_DEFAULT[1].replace("name: h90-128x128x64", "name: h90-128x128x64-splitk2")
     + "split_k: 2\n"),
    (HOPPER_DEFAULT[0] + "-persistent", HOPPER_DEFAULT[1].replace("name: h90-128x128x64",
                                                                  "name: h90-128x128x64-persistent")
     + "persistent: true\n"),
    (HOPPER_DEFAULT[0] + "-persistent-tmastore", HOPPER_DEFAULT[1].replace(
        "name: h90-128x128x64", "name: h90-128x128x64-persistent-tmastore") + "persistent: true\nepilogue: tma_store\n"),
    ("h90-64x256x64-pingpong", HOPPER_DEFAULT[1].replace("name: h90-128x128x64", "name: h90-64x256x64-pingpong")
     .replace("BM: 128, BN: 128", "BM: 64, BN: 256") + "pingpong: true\n"),
    (HOPPER_DEFAULT[0] + "-cluster2x1", HOPPER_DEFAULT[1].replace("name: h90-128x128x64",
                                                                  "name: h90-128x128x64-cluster2x1")
     + "cluster: 2x1\n"),
    (HOPPER_DEFAULT[0] + "-persistent-cluster2x1", HOPPER_DEFAULT[1].replace(
        "name: h90-128x128x64", "name: h90-128x128x64-persistent-cluster2x1") + "persistent: true\ncluster: 2x1\n"),
)
"""The folders ``prepare`` writes: the sm_80 designs, the default Hopper (sm_90a) folder, its split-K 2, its
persistent form, its persistent form with the TMA-store epilogue, a ping-pong kernel of 64x256 tiles, and the
default's 2x1 thread-block cluster (B multicast), one tile pair per cluster and persistent."""


def _attention(name: str, head_dim: int, bm: int, causal: bool) -> tuple[str, str]:
    return name, (f"name: {name}\nkind: attention\nhead_dim: {head_dim}\nBM: {bm}\nBN: 128\ndtype: f16\n"
                  f"causal: {'true' if causal else 'false'}\n")


ATTENTION = (
    _attention("attn-d128-f16", 128, 128, False),
    _attention("attn-d128-f16-causal", 128, 128, True),
    _attention("attn-d64-f16", 64, 192, False),
)
"""The FlashAttention-forward folders (``kind: attention``): FA3's tiles (128 x 128 at head dim 128, two consumer
warp groups; 192 x 128 at 64, three)."""
DESIGNS = DESIGNS + ATTENTION
REDUCED = (
    _gemm("s80-64x64x32-s3", "{BM: 64, BN: 64, BK: 32}", 4, 3, shape=256),
    HOPPER_DEFAULT,
    ATTENTION[1],
)
"""``prepare --reduced``: one small sm_80 folder, the Hopper one and the causal head-dim-128 attention folder (CI,
with the emulator)."""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _size(root: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs)


# --------------------------------------------------------------------------- prepare (here)


def image_targets(arch: str) -> list[tuple[str, bool]]:
    """``(nvcc arch, ptx?)`` of the images of a kernel for ``arch`` (``sm_80`` or ``sm_90a``)."""
    if arch == "sm_90a":
        return [("sm_90a", False), ("sm_90a", True)]
    return [("sm_80", False), ("sm_90", False), ("sm_80", True)]


TIME_LIMIT = 600.0
"""``prepare``'s default seconds per folder for solving and proving (``--time-limit``): generous (the slowest
folder, the persistent 2x1 cluster, took over 120 s on a loaded machine)."""


class PrepareError(Exception):
    """``prepare`` cannot start or finish: a folder that cannot be the pack, a name ``--only`` does not know, a pack
    over :data:`MAX_PACK_BYTES`, no folder built (the message; ``fix`` the advice; ``status`` the exit status)."""

    def __init__(self, msg: str, fix: str = "", status: int = 2) -> None:
        super().__init__(msg)
        self.msg, self.fix, self.status = msg, fix, status


def designs(reduced: bool = False, only=None) -> list[tuple[str, str]]:
    """The ``(name, problem.yaml text)`` of the folders ``prepare`` writes: :data:`DESIGNS` (:data:`REDUCED` with
    ``reduced``), limited to the names ``only`` gives (PrepareError for a name that is not one of them)."""
    every = list(REDUCED if reduced else DESIGNS)
    if only is None:
        return every
    names = [n for n, _ in every]
    unknown = [n for n in only if n not in names]
    if unknown or not only:
        raise PrepareError(f"--only: {', '.join(map(repr, unknown)) or 'no name'}: not a folder of the "
                           f"{'reduced ' if reduced else ''}pack", "give one or more of: " + ", ".join(names))
    return [(n, d) for n, d in every if n in only]


def _check_out_dir(out_dir: str) -> str:
    """The parent folder the pack is built in (created when missing); PrepareError when ``out_dir`` or a folder
    above it cannot hold a new pack."""
    if os.path.lexists(out_dir) and (not os.path.isdir(out_dir) or os.path.islink(out_dir) or os.listdir(out_dir)):
        raise PrepareError(f"'{out_dir}' exists and is not an empty folder",
                           "choose a new folder (the pack is built aside and renamed into place)")
    parent = os.path.dirname(os.path.abspath(out_dir))
    up = parent
    while not os.path.lexists(up):
        up = os.path.dirname(up)
    if not os.path.isdir(up):
        raise PrepareError(f"'{out_dir}': '{up}' is not a folder", "choose a folder whose parents are folders")
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as e:
        raise PrepareError(f"'{out_dir}': cannot make its parent folder: {e.strerror or e}",
                           "choose a folder you can write") from None
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PrepareError(f"'{out_dir}': its parent folder '{parent}' is not writable", "choose a folder you can write")
    return parent


def prepare(out_dir: str, *, reduced: bool = False, images: bool = True, time_limit: float = TIME_LIMIT,
            only=None, jobs: int = 0) -> dict:
    """Write the pack to ``out_dir`` (a new or empty folder), built aside and renamed into place; its manifest.

    Each folder is solved and proved within ``time_limit`` seconds; one that fails (the time limit, not proven, an
    error) is left out, named with its reason in the manifest's ``not_built`` (``run`` reports it NOT BUILT), and
    the next one is prepared: the pack keeps what was built. Its images are compiled by nvcc in up to ``jobs``
    threads (0: the CPUs, at most 4) while the next folder is solved. PrepareError when nothing can be packed
    (no folder built, a pack above :data:`MAX_PACK_BYTES`) or ``out_dir`` cannot be one; Ctrl-C leaves nothing."""
    from concurrent.futures import ThreadPoolExecutor

    todo = designs(reduced, only)
    if not (isinstance(time_limit, (int, float)) and 0 < time_limit <= 86400):
        raise PrepareError(f"--time-limit {time_limit!r}: out of range", "give seconds per folder, 0 < SECONDS <= 86400")
    parent = _check_out_dir(out_dir)

    import synth.api
    from synth.emit.sm90.runner import GpuError, nvcc_image
    from synth.hopper.problem import HopperGemm
    jobs = jobs or min(4, os.cpu_count() or 1)
    try:
        tmp = tempfile.mkdtemp(prefix=".gpu_pack-tmp-", dir=parent)
    except OSError as e:
        raise PrepareError(f"'{out_dir}': cannot write in '{parent}': {e.strerror or e}",
                           "choose a folder you can write") from None
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)  # mkdtemp's 0700 is for the build; the pack is an ordinary folder
    pool = ThreadPoolExecutor(max_workers=jobs)
    try:
        manifest = {"format": PACK_FORMAT, "created": _now(), "reduced": reduced, "synth_version": _version(),
                    "nvcc": _nvcc_version(), "time_limit_s": time_limit, "folders": [], "not_built": []}
        os.makedirs(os.path.join(tmp, "problems"))
        os.makedirs(os.path.join(tmp, "images"))
        pending = []

        def compile_image(name: str, source: bytes, target: str, ptx: bool) -> dict:
            label = f"{'compute' if ptx else 'sm'}_{target[3:]}"
            rel = os.path.join("images", f"{name}.{label}.{'ptx' if ptx else 'cubin'}")
            try:
                data = nvcc_image(source.decode(), target, ptx=ptx)
            except Exception as e:  # noqa: BLE001 - nvcc failed or timed out: the GPU side compiles kernel.cu itself
                why = str(e) if isinstance(e, GpuError) else f"{type(e).__name__}: {e}"
                return {"note": f"no {label} image: {(why.splitlines() or [''])[0]}"}
            with open(os.path.join(tmp, rel), "wb") as fh:
                fh.write(data)
            return {"image": {"file": rel, "target": label, "kind": "ptx" if ptx else "cubin",
                              "sha256": _sha256(data), "bytes": len(data)}}

        for n, (name, doc) in enumerate(todo, 1):
            t0 = time.monotonic()
            print(f"[{n}/{len(todo)}] {name}: solving and proving (time limit {time_limit:g} s)", flush=True)
            prob = os.path.join(tmp, "problems", f"{name}.yaml")
            with open(prob, "w", encoding="utf-8") as fh:
                fh.write(doc)
            folder = os.path.join("folders", name)
            try:
                res = synth.api.solve(prob, out=os.path.join(tmp, folder), time_limit=time_limit)
                if not res.proven or res.kernel is None:
                    raise PrepareError("not proven: no kernel to pack")
                with open(os.path.join(tmp, folder, "kernel.cu"), "rb") as fh:
                    source = fh.read()
            except Exception as e:  # noqa: BLE001 - the time limit, a refusal, an internal error: this folder only
                why = (getattr(e, "msg", None) or f"{type(e).__name__}: {e}").splitlines()[0][:500]
                shutil.rmtree(os.path.join(tmp, folder), ignore_errors=True)
                secs = round(time.monotonic() - t0, 1)
                manifest["not_built"].append({"name": name, "reason": why, "prepare_s": secs})
                print(f"[{n}/{len(todo)}] {name}: NOT BUILT after {secs} s: {why}", file=sys.stderr, flush=True)
                continue
            attention = getattr(res.problem, "kind", "gemm") == "attention"
            arch = "sm_90a" if attention or isinstance(res.problem, HopperGemm) else "sm_80"
            entry = {"name": name, "dir": folder, "arch": arch, "kind": "attention" if attention else "gemm",
                     "kernel_sha256": _sha256(source), "images": [], "notes": [],
                     "solve_s": round(time.monotonic() - t0, 1)}
            manifest["folders"].append(entry)
            futures = [pool.submit(compile_image, name, source, target, ptx)
                       for target, ptx in (image_targets(arch) if images else [])]
            pending.append((n, entry, futures, time.monotonic()))
            print(f"[{n}/{len(todo)}] {name}: proven ({arch}, {entry['solve_s']} s)"
                  + (f"; compiling {len(futures)} images with nvcc" if futures else ""), flush=True)
        for n, entry, futures, t1 in pending:
            for f in futures:
                got = f.result()
                entry["images"].append(got["image"]) if "image" in got else entry["notes"].append(got["note"])
            entry["prepare_s"] = round(entry["solve_s"] + time.monotonic() - t1, 1)
            if futures:
                print(f"[{n}/{len(todo)}] {entry['name']}: {len(entry['images'])} images"
                      + "".join(f"; {x}" for x in entry["notes"]), flush=True)
        if not manifest["folders"]:
            raise PrepareError("no folder was built: " + "; ".join(f"{x['name']}: {x['reason']}"
                                                                   for x in manifest["not_built"]),
                               "see the reasons above; raise --time-limit if it ran out", status=1)
        with open(os.path.join(tmp, "manifest.json"), "w", encoding="utf-8") as fh:
            json.dump(manifest, fh, indent=1)
            fh.write("\n")
        size = _size(tmp)
        if size > MAX_PACK_BYTES:
            raise PrepareError(f"the pack is {size} bytes, above {MAX_PACK_BYTES}", "pack fewer folders (--only)",
                               status=1)
        manifest["bytes"] = size
        os.rename(tmp, out_dir) if not os.path.isdir(out_dir) else _move_into(tmp, out_dir)
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    pool.shutdown()
    missing = manifest["not_built"]
    print(f"pack: {out_dir} ({size / 2**20:.1f} MiB, {len(manifest['folders'])} folders"
          + (f"; NOT BUILT: {', '.join(x['name'] for x in missing)}" if missing else "") + ")", flush=True)
    return manifest


def _move_into(tmp: str, out_dir: str) -> None:
    os.rmdir(out_dir)  # empty (checked above)
    os.rename(tmp, out_dir)


def _version() -> str:
    try:
        import synth

        return synth.__version__
    except Exception:  # noqa: BLE001
        return "?"


def _nvcc_version() -> str:
    from synth.emit.sass import tool

    nvcc = tool("nvcc")
    if nvcc is None:
        return "absent"
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "?"
    return next((ln.strip() for ln in out.splitlines() if "release" in ln), out.strip()[-80:])


# --------------------------------------------------------------------------- the pack, read back


class PackError(Exception):
    """A pack that is missing, edited or not this script's (exit 2)."""


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z")
_SM90A_MARK = b"wgmma.mma_async"
"""Text every sm_90a kernel.cu holds and no sm_80 one does (the arch a manifest records is checked against it)."""


def read_pack(pack: str) -> dict:
    """``DIR/manifest.json`` checked: this script's format, each folder's kernel.cu and image with the recorded
    sha256, its arch that of the kernel and its images', its name and folder as ``prepare`` writes them, and the
    folders ``prepare`` could not build (``not_built``: name and reason); PackError otherwise (the folders' own files
    are checked by :func:`synth.kernel.load` against their manifests)."""
    path = os.path.join(pack, "manifest.json")
    try:
        if not os.path.isfile(path) or os.path.getsize(path) > MAX_MANIFEST_BYTES:
            raise PackError(f"{path}: missing, not a file or larger than {MAX_MANIFEST_BYTES} bytes")
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError) as e:
        raise PackError(f"{path}: cannot be read: {e}") from None
    except RecursionError:
        raise PackError(f"{path}: cannot be read: nested too deeply") from None
    if not isinstance(doc, dict) or doc.get("format") != PACK_FORMAT or not isinstance(doc.get("folders"), list) \
            or not isinstance(doc.setdefault("not_built", []), list):
        raise PackError(f"{path}: not a {PACK_FORMAT} manifest")
    names = set()
    for i, f in enumerate(doc["not_built"]):
        if not isinstance(f, dict) or not all(isinstance(f.get(k), str) for k in ("name", "reason")) \
                or not _NAME.match(f["name"]) or f["name"] in names:
            raise PackError(f"{path}: not_built[{i}]: needs a folder name (once) and a reason string")
        names.add(f["name"])
    for i, f in enumerate(doc["folders"]):
        where = f"{path}: folders[{i}]"
        if not isinstance(f, dict) or not all(isinstance(f.get(k), str) for k in ("name", "dir", "arch",
                                                                                  "kernel_sha256")):
            raise PackError(f"{where}: needs name, dir, arch and kernel_sha256 strings")
        if not _NAME.match(f["name"]) or f["name"] in names:
            raise PackError(f"{where}: name {f['name'][:100]!r} is not one prepare writes, or named twice")
        names.add(f["name"])
        if f["arch"] not in ("sm_80", "sm_90a") or f["dir"] != f"folders/{f['name']}":
            raise PackError(f"{where}: arch {f['arch'][:100]!r} / dir {f['dir'][:200]!r} is not one prepare writes")
        if f.setdefault("kind", "gemm") not in ("gemm", "attention") or f["kind"] == "attention" and \
                f["arch"] != "sm_90a":
            raise PackError(f"{where}: kind {str(f['kind'])[:100]!r} (arch {f['arch']}) is not one prepare writes")
        kpath = os.path.join(pack, f["dir"], "kernel.cu")
        source = open(kpath, "rb").read() if os.path.isfile(kpath) else None
        if source is None or _sha256(source) != f["kernel_sha256"]:
            raise PackError(f"{kpath}: missing or not the kernel.cu the pack was prepared with")
        if (_SM90A_MARK in source) != (f["arch"] == "sm_90a"):
            raise PackError(f"{where}: arch {f['arch']} is not the arch of its kernel.cu")
        imgs = f.get("images", [])
        if not isinstance(imgs, list):
            raise PackError(f"{where}.images: not a list")
        targets = {f"{'compute' if ptx else 'sm'}_{t[3:]}": "ptx" if ptx else "cubin" for t, ptx in
                   image_targets(f["arch"])}
        for j, im in enumerate(imgs):
            if not isinstance(im, dict) or not all(isinstance(im.get(k), str) for k in ("file", "target", "sha256")):
                raise PackError(f"{where}.images[{j}]: needs file, target and sha256")
            if targets.get(im["target"]) != im.get("kind", targets.get(im["target"])):
                raise PackError(f"{where}.images[{j}]: target {im['target'][:100]!r} (kind {im.get('kind')!r}) is not "
                                f"an image of an {f['arch']} kernel")
            ipath = os.path.join(pack, im["file"])
            if os.path.isabs(im["file"]) or ".." in im["file"].split("/") or not os.path.isfile(ipath) or \
                    _sha256(open(ipath, "rb").read()) != im["sha256"]:
                raise PackError(f"{ipath}: missing or changed since prepare")
    return doc


def images_for(pack: str, entry: dict, device_arch: str) -> list[tuple[str, bytes]]:
    """The folder's images a GPU of ``device_arch`` (``sm_90``...) can load, cubins first, then PTX."""
    cubins, ptx = [], []
    for im in entry.get("images", []):
        t = im["target"]
        with open(os.path.join(pack, im["file"]), "rb") as fh:
            data = fh.read()
        if im.get("kind") == "ptx":
            ptx.append((f"{t} PTX (JIT)", data))
        elif t in (device_arch, device_arch + "a"):
            cubins.append((f"{t} cubin", data))
    return cubins + ptx


# --------------------------------------------------------------------------- the report, written as it goes


class Report:
    """DIR/report.json and DIR/report.md, rewritten (atomically) after every change."""

    def __init__(self, pack: str, backend: str, budget: float) -> None:
        self.pack = pack
        self.doc = {"format": REPORT_FORMAT, "status": "running", "started": _now(), "finished": None,
                    "backend": backend, "budget_s": budget, "elapsed_s": 0.0, "reference": None,
                    "environment": {}, "kernels": [], "skipped": [], "wrong": 0, "not_built": 0}
        self.t0 = time.monotonic()

    def kernel(self, name: str, arch: str) -> dict:
        k = {"name": name, "arch": arch, "ok": None, "load": None, "image": None, "registers": None,
             "correctness": [], "timing": [], "sanitizer": {}, "notes": []}
        self.doc["kernels"].append(k)
        self.save()
        return k

    def skip(self, what: str) -> None:
        self.doc["skipped"].append(what)
        self.save()

    def save(self) -> None:
        self.doc["elapsed_s"] = round(time.monotonic() - self.t0, 1)
        self.doc["wrong"] = sum(1 for k in self.doc["kernels"] if k["ok"] is False)
        self.doc["not_built"] = sum(1 for k in self.doc["kernels"] if _not_built(k))
        for name, text in (("report.json", json.dumps(self.doc, indent=1) + "\n"), ("report.md", self.markdown())):
            path = os.path.join(self.pack, name)
            fd, tmp = tempfile.mkstemp(prefix=".report-", dir=self.pack)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            os.replace(tmp, path)

    def markdown(self) -> str:
        d = self.doc
        env = d["environment"]
        lines = [f"# synth GPU check ({d['status']})", "",
                 f"- started {d['started']}, finished {d['finished'] or '-'}, {d['elapsed_s']} s of a "
                 f"{d['budget_s']} s budget", f"- backend: {d['backend']}; reference: {d['reference']}"]
        lines += [f"- {k}: {v}" for k, v in env.items()]
        lines += ["", "| kernel | result | shapes ok | image | regs | TFLOP/s warm / flushed (cuBLAS; attention: "
                  "torch SDPA flash) | sanitizer |", "|---|---|---|---|---|---|---|"]
        for k in d["kernels"]:
            good = sum(1 for c in k["correctness"] if c["status"] in ("ok", "refused"))
            perf = "; ".join(f"{_shape_label(t)} {_f(t.get('tflops_warm'))} / {_f(t.get('tflops_flushed'))} "
                             f"({_f(_ref(t)[1])} / {_f(_ref(t)[2])})" for t in k["timing"]) or "-"
            san = ", ".join(f"{tool} {r['result']}" for tool, r in k["sanitizer"].items()) or "-"
            res = {True: "OK", False: "WRONG"}.get(k["ok"], "NOT BUILT" if _not_built(k) else "skipped" if str(
                k["load"]).startswith("skipped") else "running")
            lines.append(f"| {k['name']} ({k['arch']}) | {res} | {good}/{len(k['correctness'])} | {k['image'] or '-'} "
                         f"| {k['registers'] if k['registers'] is not None else '-'} | {perf} | {san} |")
        for k in d["kernels"]:
            if _not_built(k):
                lines.append(f"- {k['name']}: {k['load']} (prepare left it out)")
            bad = [c for c in k["correctness"] if c["status"] not in ("ok", "refused")]
            for c in bad:
                lines.append(f"- {k['name']} {c['what']} {c['shape']}: {c['status']}: {c.get('message', '')}")
            lines += [f"- {k['name']}: {n}" for n in k["notes"]]
            for t in k["timing"]:
                lines.append(f"- {k['name']} {t['shape']}: warm {_f(t.get('ms_warm'), 4)} ms, flushed "
                             f"{_f(t.get('ms_flushed'), 4)} ms over {t.get('launches')} launches; clock before "
                             f"{t.get('clock_before')}, after {t.get('clock_after')}")
        lines += [f"- skipped: {s}" for s in d["skipped"]]
        return "\n".join(lines) + "\n"


def _shape_label(t: dict) -> str:
    """A timed shape in words: ``4096³`` (a GEMM), ``4x16x4096x4096`` (attention's B x H x Sq x Sk)."""
    return f"{t['shape'][0]}³" if len(t["shape"]) == 3 else "x".join(map(str, t["shape"]))


def _ref(t: dict) -> tuple:
    """``(name, TFLOP/s warm, flushed)`` of a timing's reference: cuBLAS for a GEMM, torch SDPA for attention."""
    if "sdpa_tflops_warm" in t or len(t["shape"]) == 4:
        return "SDPA", t.get("sdpa_tflops_warm"), t.get("sdpa_tflops_flushed")
    return "cuBLAS", t.get("cublas_tflops_warm"), t.get("cublas_tflops_flushed")


def _not_built(k: dict) -> bool:
    """Whether report entry ``k`` is a folder ``prepare`` could not build (the manifest's ``not_built``)."""
    return str(k.get("load")).startswith("not built")


def _f(x, digits: int = 1) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


# --------------------------------------------------------------------------- run (there)


class Budget:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()


def shapes_for(kernel, arch: str, sms: int, emulator: bool) -> list[tuple[str, int, int, int]]:
    """``(what, M, N, K)`` of the correctness runs of ``kernel`` (a Kernel or HopperKernel); the last ones,
    the :data:`BIG` cubes, are also timed. The emulator gets the small shapes only."""
    if arch == "sm_90a":
        c = kernel.config
        BM, BN, BK, stages, split = c.bm, c.bn, c.bk, c.stages, c.split_k
    else:
        f = kernel.facts
        BM, BN, BK, split = f.BM, f.BN, f.BK, f.split_k
        stages = kernel.problem.gemm.stages if kernel.problem is not None else 3
    kmin = max(split, 1) * BK
    below = max(stages * BK - 8, 8)
    out = [("M, N off the tile grid", BM + 17 if emulator else 2 * BM + 17, BN + 9 if emulator else 3 * BN + 9,
            max(4 * BK if not emulator else 2 * BK, kmin + 8)),
           (f"K = {below} below stages x BK = {stages * BK}", BM - 3, BN + 5, below),
           ("K = 8", 40, 24, 8),
           ("one tile", BM, BN, max(2 * BK, kmin))]
    if not emulator:
        side = 1
        while side * side <= sms:
            side += 1
        out.append((f"{side * side} tiles > {sms} SMs", side * BM, side * BN, max(512, kmin)))
        out += [(f"{n}^3", n, n, n) for n in BIG]
    return out


def k_allowed(kernel, arch: str, K: int) -> bool:
    if arch == "sm_90a":
        return K >= 1 and K % 8 == 0 and -(-K // kernel.config.bk) >= kernel.config.split_k
    return kernel.facts.k_allowed(K)


class Env:
    """What the run has: torch (reference and cuBLAS), the device, nvidia-smi and compute-sanitizer."""

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.torch = None
        try:
            import torch  # noqa: PLC0415

            self.torch = torch
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
        except Exception as e:  # noqa: BLE001 - absent on the CI machine: numpy is the reference
            self.torch_error = f"{type(e).__name__}: {e}"
        self.gpu = backend == "cuda" and self.torch is not None and self.torch.cuda.is_available()
        self.smi = shutil.which("nvidia-smi")
        self.sanitizer = shutil.which("compute-sanitizer") or next(
            (p for p in ("/usr/local/cuda/bin/compute-sanitizer",) if os.path.isfile(p)), None)
        self.device_arch, self.sms, self.dev = "sm_90", 132, None

    def info(self) -> dict:
        import platform

        d = {"python": platform.python_version(), "numpy": np.__version__,
             "torch": getattr(self.torch, "__version__", None) or f"absent ({getattr(self, 'torch_error', '')})"}
        try:
            import cuda.bindings  # noqa: PLC0415

            d["cuda-python"] = getattr(cuda.bindings, "__version__", "?")
        except Exception as e:  # noqa: BLE001
            d["cuda-python"] = f"absent ({type(e).__name__})"
        if self.backend == "cuda":
            from synth.emit.sm90.runner import CudaDevice

            self.dev = CudaDevice()
            self.device_arch = self.dev.arch
            self.sms = self.dev.attribute("MULTIPROCESSOR_COUNT")
            d["gpu"] = f"{self.dev.name} ({self.device_arch}, {self.sms} SMs)"
            ver = self.dev.cu.cuDriverGetVersion()
            d["driver (CUDA version)"] = str(ver[1]) if int(ver[0]) == 0 else "?"
            if self.smi:
                d["nvidia-smi"] = self._smi("name,driver_version,clocks.max.sm,clocks.max.mem,power.limit")
            d["torch.cuda"] = getattr(getattr(self.torch, "version", None), "cuda", None)
        d["nvcc"] = _which_version("nvcc")
        d["compute-sanitizer"] = self.sanitizer or "absent"
        return d

    def _smi(self, query: str) -> str:
        try:
            p = subprocess.run([self.smi, f"--query-gpu={query}", "--format=csv,noheader,nounits", "-i", "0"],
                               capture_output=True, text=True, timeout=15)
            return p.stdout.strip() or p.stderr.strip()[-200:]
        except (OSError, subprocess.SubprocessError) as e:
            return f"? ({type(e).__name__})"

    def clock(self) -> str:
        """The SM clock now: nvidia-smi's ``clocks.sm`` (MHz, with temperature and power), else the CUDA
        attribute (the maximum clock, not the current one)."""
        if self.smi:
            return "sm MHz, mem MHz, C, W, pstate: " + self._smi("clocks.sm,clocks.mem,temperature.gpu,power.draw,pstate")
        if self.dev is not None:
            try:
                return f"max {self.dev.attribute('CLOCK_RATE') // 1000} MHz (CUDA attribute; no nvidia-smi)"
            except Exception as e:  # noqa: BLE001 - an attribute this driver no longer has
                return f"? (no nvidia-smi; CLOCK_RATE: {type(e).__name__})"
        return "-"


def _which_version(name: str) -> str:
    from synth.emit.sass import tool

    path = tool(name)
    if path is None:
        return "absent"
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return path
    return next((ln.strip() for ln in out.splitlines() if "release" in ln), path)


class Data:
    """Operands and references, made once per shape (seeded) and shared by the kernels."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.cache: dict = {}

    def operands(self, M: int, N: int, K: int):
        key = (M, N, K)
        if key not in self.cache:
            for old in [x for x in self.cache if x not in [(n, n, n) for n in BIG]]:  # small: one at a time
                self.cache.pop(old)
            t = self.env.torch
            if self.env.gpu:
                g = t.Generator(device="cuda").manual_seed(M * 1_000_003 + N * 1009 + K)
                a = (t.rand(M, K, device="cuda", generator=g) * 2 - 1).half()
                b = (t.rand(N, K, device="cuda", generator=g) * 2 - 1).half()
                ref = a.float() @ b.float().t()
                self.cache[key] = (a.cpu().numpy(), b.cpu().numpy(), ref, (a, b))
            else:
                rng = np.random.default_rng(M * 1_000_003 + N * 1009 + K)
                A = rng.uniform(-1, 1, (M, K)).astype(np.float16)
                B = rng.uniform(-1, 1, (N, K)).astype(np.float16)
                self.cache[key] = (A, B, A.astype(np.float64) @ B.astype(np.float64).T, None)
        return self.cache[key]

    def compare(self, C: np.ndarray, ref) -> tuple[float, int, int]:
        """``(max |C - ref|, entries out of tolerance, NaNs)``."""
        if self.env.gpu:
            t = self.env.torch
            c = t.from_numpy(np.ascontiguousarray(C)).cuda()
            nan = int(t.isnan(c).sum())
            diff = (c - ref).abs()
            bad = int((~(diff <= ATOL + RTOL * ref.abs())).sum())
            return float(t.nan_to_num(diff, nan=float("inf")).max()), bad, nan
        nan = int(np.count_nonzero(np.isnan(C)))
        diff = np.abs(C.astype(np.float64) - ref)
        bad = int(np.count_nonzero(~(diff <= ATOL + RTOL * np.abs(ref))))
        return float(np.nan_to_num(diff, nan=np.inf).max()), bad, nan


def cublas(env: Env, data: Data, M: int, N: int, K: int, flush_buf) -> dict:
    """cuBLAS (``torch.matmul``, f16 in and out) on the shape's operands: median ms warm and flushed."""
    t = env.torch
    _, _, _, (a, b) = data.operands(M, N, K)
    bt = b.t()
    t.matmul(a, bt)
    t.cuda.synchronize()
    out = {}
    for mode in ("warm", "flushed"):
        times = []
        for _ in range(LAUNCHES):
            if mode == "flushed":
                flush_buf.zero_()
            s, e = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
            s.record()
            t.matmul(a, bt)
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e))
        out[f"cublas_ms_{mode}"] = float(np.median(times))
        out[f"cublas_tflops_{mode}"] = 2.0 * M * N * K / (out[f"cublas_ms_{mode}"] * 1e-3) / 1e12
    return out


def shape_verdict(c: dict, err: float, bad: int, nan: int, t0: float, what: str) -> bool:
    """Record one shape's comparison in its report entry ``c`` (``what``: the output's name); True when it is ok."""
    c.update(status="ok" if bad == 0 and nan == 0 else "wrong", max_abs_err=err, bad=bad, nan=nan,
             seconds=round(time.monotonic() - t0, 2))
    if c["status"] != "ok":
        c["message"] = f"{bad} entries out of tolerance, {nan} NaN, max |{what} - ref| = {err:.3g}"
    return c["status"] == "ok"


def shape_error(c: dict, e: Exception, t0: float) -> None:
    """Record a shape whose launch or check raised (a refused launch, a driver error) in its report entry ``c``."""
    msg = getattr(e, "msg", None) or f"{type(e).__name__}: {str(e)[:2000]}"
    c.update(status="error", message=msg, seconds=round(time.monotonic() - t0, 2))


def release(job, k: dict, rep: Report) -> None:
    """Free a shape's launch (``job``, or None) and save the report; a failure to free is a note of kernel ``k``."""
    if job is not None:
        try:
            job.close()
        except Exception as e:  # noqa: BLE001 - a poisoned context: said in the report
            k["notes"].append(f"freeing the buffers failed: {type(e).__name__}: {e}")
    rep.save()


def run_kernel(pack: str, entry: dict, env: Env, data: Data, rep: Report, budget: Budget, cublas_cache: dict,
               flush) -> dict:
    """Load, check and time one folder's kernel; its report entry (``ok`` False on any wrong result)."""
    import synth.kernel

    if entry.get("kind") == "attention":
        return run_attention(pack, entry, env, rep, budget, flush)
    k = rep.kernel(entry["name"], entry["arch"])
    folder = os.path.join(pack, entry["dir"])
    if env.backend == "cuda" and entry["arch"] == "sm_90a" and not env.device_arch.startswith("sm_90"):
        k["load"] = f"skipped: an sm_90a kernel, and this GPU is {env.device_arch}"
        rep.skip(f"{entry['name']}: needs an sm_90 GPU")
        return k
    try:
        kern = synth.kernel.load(folder, backend=env.backend, images=images_for(pack, entry, env.device_arch))
    except Exception as e:  # noqa: BLE001 - a refused folder (SynthError) or a driver failure: reported
        k["load"], k["ok"] = f"refused: {getattr(e, 'msg', None) or f'{type(e).__name__}: {e}'}", False
        rep.save()
        return k
    k["load"] = f"ok ({type(kern).__name__}, backend {kern.backend})"
    emulator = env.backend == "emulator"
    ok = True
    for what, M, N, K in shapes_for(kern, entry["arch"], env.sms, emulator):
        big = (M, N, K) in [(n, n, n) for n in BIG]
        reserve = 0.0 if emulator else SANITIZER_RESERVE
        if budget.left() < reserve + (20 if big else 5):
            rep.skip(f"{entry['name']} {what} ({M}x{N}x{K}): budget")
            continue
        if big and not env.gpu and max(M, N, K) > 4096:
            rep.skip(f"{entry['name']} {what}: numpy is the reference here (no torch on the GPU): too slow")
            continue
        c = {"what": what, "shape": [M, N, K]}
        k["correctness"].append(c)
        A, B, ref, _ = data.operands(M, N, K)
        t0 = time.monotonic()
        if not k_allowed(kern, entry["arch"], K):
            try:
                kern.check(A, B)
                c.update(status="wrong", message="a K the kernel was not proved for was accepted")
                ok = False
            except synth.kernel.KernelError as e:
                c.update(status="refused", message=e.msg)
            rep.save()
            continue
        job = None
        try:
            if emulator:
                C = kern(A, B)
            else:
                job = kern.prepare(A, B)
                job.run()
                C, status = job.fetch()
                if status:
                    raise synth.kernel.KernelError(None, f"the kernel refused the launch (status {status})")
                k["image"], k["registers"] = job.image, job.registers
            err, bad, nan = data.compare(C, ref)
            if not shape_verdict(c, err, bad, nan, t0, "C"):
                ok = False
            elif job is not None and big:
                k["timing"].append(time_kernel(job, env, data, M, N, K, cublas_cache, flush))
        except Exception as e:  # noqa: BLE001 - a refused launch, a driver error: this shape is wrong, go on
            shape_error(c, e, t0)
            ok = False
        finally:
            release(job, k, rep)
    k["ok"] = ok
    rep.save()
    return k


# --------------------------------------------------------------------------- attention (kind: attention folders)


def attention_shapes(facts, sms: int, emulator: bool) -> list[tuple[str, int, int, int, int, bool]]:
    """``(what, B, H, Sq, Sk, timed)`` of an attention folder's runs: odd lengths (a ragged last Q tile and KV
    block), one key, more rows than keys (under the causal mask: rows that see no key are 0), more batch x heads than
    SMs, then the timed shapes (``B = 16384 / S``, ``H = 2048 / d``; S = 1024 and 4096). The emulator gets the three
    small ones."""
    bm, bn, d = facts.bm, facts.bn, facts.head_dim
    out = [("odd lengths", 1, 2, bm + 2, bn - 51, False), ("one key", 1, 1, 77, 1, False),
           ("Sq > Sk, both ragged", 2, 1, 2 * bm + 44, bn + 2, False)]
    if not emulator:
        heads = -(-(sms + 1) // 4)
        n = ATTENTION_WIDE_SEQLEN
        out.append((f"batch x heads {4 * heads} > {sms} SMs", 4, heads, n, n, False))
        out += [(f"seqlen {n}", max(1, ATTENTION_TOKENS // n), max(1, ATTENTION_HIDDEN // d), n, n, True)
                for n in ATTENTION_SEQLENS]
    return out


ATTENTION_SEQLENS = (1024, 4096)
"""The timed sequence lengths (``Sq = Sk``)."""
ATTENTION_TOKENS, ATTENTION_HIDDEN = 16384, 2048
"""A timed shape's ``B S`` and ``H d`` (FlashAttention's benchmark: 16k tokens, hidden size 2048)."""
ATTENTION_WIDE_SEQLEN = 1000
"""Sq = Sk of the more-batch-x-heads-than-SMs run (not a multiple of the tiles)."""


def attention_inputs(env: Env, dtype: str, B: int, H: int, Sq: int, Sk: int, d: int):
    """q, k, v (standard normal, seeded by the shape) as numpy arrays of the kernel's type (float16, or bfloat16 bits
    as uint16) and, with torch on the GPU, as torch tensors there."""
    seed = ((B * 1009 + H) * 1_000_003 + Sq) * 31 + Sk
    shapes = ((B, H, Sq, d), (B, H, Sk, d), (B, H, Sk, d))
    if env.gpu:
        t = env.torch
        g = t.Generator(device="cuda").manual_seed(seed % (1 << 62))
        tt = t.float16 if dtype == "f16" else t.bfloat16
        xs = [t.randn(*s, device="cuda", generator=g).to(tt) for s in shapes]
        host = [x.cpu().view(t.int16).numpy().view(np.uint16) if dtype == "bf16" else x.cpu().numpy() for x in xs]
        return host, xs
    from synth.emit.sm90.emulate import bf16_bits

    rng = np.random.default_rng(seed % (1 << 62))
    xs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    return [x.astype(np.float16) if dtype == "f16" else bf16_bits(x) for x in xs], None


def attention_reference(env: Env, host, dev, dtype: str, causal: bool, scale: float):
    """softmax(scale q k^T) v in float32 on the GPU (torch's ``scaled_dot_product_attention`` of the rounded inputs,
    TF32 off; under the causal mask with ``Sq != Sk`` its own float32 arithmetic, the mask bottom-right aligned as
    FlashAttention's and a row that sees no key 0: torch's ``is_causal`` aligns top-left), else numpy's float64."""
    if env.gpu:
        t = env.torch
        q, k, v = (x.float() for x in dev)
        Sq, Sk = q.shape[2], k.shape[2]
        if not causal or Sq == Sk:
            return t.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
        s = t.matmul(q, k.transpose(-1, -2)) * scale
        r = t.arange(Sq, device="cuda")[:, None]
        c = t.arange(Sk, device="cuda")[None, :]
        s = s.masked_fill(c > r + Sk - Sq, float("-inf"))
        p = t.nan_to_num(t.softmax(s, dim=-1), nan=0.0)  # a row that sees no key: 0
        return t.matmul(p, v)
    from synth.emit.sm90.emulate import bf16_value
    from synth.emit.sm90.emulate_attention import reference

    vals = [x.astype(np.float32) if dtype == "f16" else bf16_value(x) for x in host]
    return reference(*vals, causal=causal, scale=scale)


def attention_compare(env: Env, o: np.ndarray, ref, tol: float) -> tuple[float, int, int]:
    """``(max |o - ref|, entries out of tolerance |o - ref| <= tol (1 + |ref|), NaNs)``."""
    if env.gpu:
        t = env.torch
        c = t.from_numpy(np.ascontiguousarray(o)).cuda()
        nan = int(t.isnan(c).sum())
        diff = (c - ref).abs()
        bad = int((~(diff <= tol * (ref.abs() + 1))).sum())
        return float(t.nan_to_num(diff, nan=float("inf")).max()), bad, nan
    nan = int(np.count_nonzero(np.isnan(o)))
    diff = np.abs(o.astype(np.float64) - ref)
    bad = int(np.count_nonzero(~(diff <= tol * (1 + np.abs(ref)))))
    return float(np.nan_to_num(diff, nan=np.inf).max()), bad, nan


def sdpa(env: Env, dev, causal: bool, flush_buf) -> dict:
    """torch's ``scaled_dot_product_attention`` (flash backend where torch has it) on the same inputs: median ms warm
    and flushed, and which backend ran."""
    t = env.torch
    q, k, v = dev
    F = t.nn.functional
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: PLC0415 - torch >= 2.3

        ctx, backend = (lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)), "flash"
    except Exception:  # noqa: BLE001 - an older torch: its default choice
        import contextlib

        ctx, backend = contextlib.nullcontext, "default"
    out = {"sdpa_backend": backend}
    with ctx():
        F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        t.cuda.synchronize()
        for mode in ("warm", "flushed"):
            times = []
            for _ in range(LAUNCHES):
                if mode == "flushed":
                    flush_buf.zero_()
                s, e = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
                s.record()
                F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                e.record()
                e.synchronize()
                times.append(s.elapsed_time(e))
            out[f"sdpa_ms_{mode}"] = float(np.median(times))
    return out


def run_attention(pack: str, entry: dict, env: Env, rep: Report, budget: Budget, flush) -> dict:
    """Load, check and time one attention folder's kernel (:func:`attention_shapes`); its report entry."""
    import synth.kernel
    from synth.emit.sm90.emulate_attention import TOLERANCE

    k = rep.kernel(entry["name"], entry["arch"])
    folder = os.path.join(pack, entry["dir"])
    if env.backend == "cuda" and not env.device_arch.startswith("sm_90"):
        k["load"] = f"skipped: an sm_90a kernel, and this GPU is {env.device_arch}"
        rep.skip(f"{entry['name']}: needs an sm_90 GPU")
        return k
    try:
        kern = synth.kernel.load(folder, backend=env.backend, images=images_for(pack, entry, env.device_arch))
    except Exception as e:  # noqa: BLE001 - a refused folder (SynthError) or a driver failure: reported
        k["load"], k["ok"] = f"refused: {getattr(e, 'msg', None) or f'{type(e).__name__}: {e}'}", False
        rep.save()
        return k
    k["load"] = f"ok ({type(kern).__name__}, backend {kern.backend})"
    f = kern.facts
    emulator = env.backend == "emulator"
    scale = f.head_dim ** -0.5
    ok = True
    for what, B, H, Sq, Sk, timed in attention_shapes(f, env.sms, emulator):
        reserve = 0.0 if emulator else SANITIZER_RESERVE
        if budget.left() < reserve + (20 if timed else 5):
            rep.skip(f"{entry['name']} {what} ({B}x{H}x{Sq}x{Sk}): budget")
            continue
        c = {"what": what, "shape": [B, H, Sq, Sk]}
        k["correctness"].append(c)
        t0 = time.monotonic()
        job = None
        try:
            host, dev = attention_inputs(env, f.dtype, B, H, Sq, Sk, f.head_dim)
            if emulator:
                o = kern(*host, scale=scale)
            else:
                job = kern.prepare(*host, scale=scale)
                job.run()
                o, _ = job.fetch()
                k["image"], k["registers"] = job.image, job.registers
            ref = attention_reference(env, host, dev, f.dtype, f.causal, scale)
            err, bad, nan = attention_compare(env, o, ref, TOLERANCE[f.dtype])
            if not shape_verdict(c, err, bad, nan, t0, "o"):
                ok = False
            elif job is not None and timed:
                k["timing"].append(time_attention(job, env, f, dev, (B, H, Sq, Sk), flush))
            del ref, dev
        except Exception as e:  # noqa: BLE001 - a refused launch, a driver error: this shape is wrong, go on
            shape_error(c, e, t0)
            ok = False
        finally:
            release(job, k, rep)
    k["ok"] = ok
    rep.save()
    return k


def time_attention(job, env: Env, facts, dev, shape: tuple, flush) -> dict:
    """The kernel's median ms and TFLOP/s warm and flushed, and torch SDPA's on the same inputs (with torch)."""
    B, H, Sq, Sk = shape
    flop = facts.flops(B, H, Sq, Sk)
    t = {"shape": list(shape), "launches": LAUNCHES, "flop": flop, "clock_before": env.clock()}
    job.run()
    warm = job.time_ms(LAUNCHES)
    flushed = job.time_ms(LAUNCHES, before=flush[0])
    t["clock_after"] = env.clock()
    t["ms_warm"], t["ms_flushed"] = float(np.median(warm)), float(np.median(flushed))
    for mode in ("warm", "flushed"):
        t[f"tflops_{mode}"] = flop / (t[f"ms_{mode}"] * 1e-3) / 1e12
    if env.gpu:
        t.update(sdpa(env, dev, facts.causal, flush[1]))
        for mode in ("warm", "flushed"):
            t[f"sdpa_tflops_{mode}"] = flop / (t[f"sdpa_ms_{mode}"] * 1e-3) / 1e12
        t["fraction_of_sdpa_warm"] = t["tflops_warm"] / t["sdpa_tflops_warm"]
    return t


def time_kernel(job, env: Env, data: Data, M: int, N: int, K: int, cublas_cache: dict, flush) -> dict:
    flop = 2.0 * M * N * K
    t = {"shape": [M, N, K], "launches": LAUNCHES, "clock_before": env.clock()}
    job.run()
    warm = job.time_ms(LAUNCHES)
    flushed = job.time_ms(LAUNCHES, before=flush[0])
    t["clock_after"] = env.clock()
    t["ms_warm"], t["ms_flushed"] = float(np.median(warm)), float(np.median(flushed))
    t["tflops_warm"] = flop / (t["ms_warm"] * 1e-3) / 1e12
    t["tflops_flushed"] = flop / (t["ms_flushed"] * 1e-3) / 1e12
    if env.gpu:
        if (M, N, K) not in cublas_cache:
            cublas_cache[(M, N, K)] = cublas(env, data, M, N, K, flush[1])
        t.update(cublas_cache[(M, N, K)])
        t["fraction_of_cublas_warm"] = t["tflops_warm"] / t["cublas_tflops_warm"]
    return t


def sanitize_all(pack: str, folders: list, env: Env, rep: Report, budget: Budget) -> None:
    """One launch of each kernel under ``compute-sanitizer --tool racecheck`` and ``--tool synccheck`` at a
    small shape (:func:`one` in a child process): all at once (the GPU has room; each child is mostly CPU),
    stopped at the budget's end."""
    jobs = []
    for tool in SANITIZER_TOOLS:
        for entry in folders:
            k = next(x for x in rep.doc["kernels"] if x["name"] == entry["name"])
            if str(k.get("load", "")).startswith(("refused", "skipped")):
                continue
            cmd = [env.sanitizer, "--tool", tool, "--error-exitcode", "86", "--print-limit", "20",
                   sys.executable, os.path.abspath(__file__), "one", pack, entry["name"]]
            out = tempfile.TemporaryFile(mode="w+")
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True, start_new_session=True)
            jobs.append((k, tool, proc, out, time.monotonic()))
    pending = list(jobs)
    while pending and budget.left() > 5:
        time.sleep(0.5)
        for job in list(pending):
            k, tool, proc, out, t0 = job
            rc = proc.poll()
            if rc is None:
                continue
            pending.remove(job)
            _sanitized(k, tool, rc, out, t0, rep)
    for k, tool, proc, out, t0 in pending:  # past the budget: stop what still runs (our own children's group)
        try:
            os.killpg(proc.pid, 9)
        except OSError:
            proc.kill()
        proc.wait()
        _sanitized(k, tool, None, out, t0, rep)


def _sanitized(k: dict, tool: str, rc, out, t0: float, rep: Report) -> None:
    out.seek(0)
    text = out.read()
    out.close()
    result = {0: "ok", 86: "errors", 1: "wrong result"}.get(rc, "stopped at the budget" if rc is None else f"exit {rc}")
    k["sanitizer"][tool] = {"result": result, "seconds": round(time.monotonic() - t0, 1), "output": text[-3000:]}
    if rc not in (0, None):
        k["ok"] = False
    if rc is None:
        rep.skip(f"{k['name']} {tool}: stopped at the budget's end")
    rep.save()
    print(f"  {tool:9s} {k['name']}: {result} ({time.monotonic() - t0:.0f} s)", flush=True)


def one(pack: str, name: str) -> int:
    """The sanitizer's child: one launch at a small shape, checked against numpy (no torch: fast start)."""
    import synth.kernel

    try:
        doc = read_pack(pack)
    except PackError as e:
        print(f"gpu_check: error: {e}", file=sys.stderr)
        return 2
    entry = next((f for f in doc["folders"] if f["name"] == name), None)
    if entry is None:
        print(f"gpu_check: error: no folder {name!r} in the pack", file=sys.stderr)
        return 2
    from synth.emit.sm90.runner import CudaDevice

    arch = CudaDevice().arch
    kern = synth.kernel.load(os.path.join(pack, entry["dir"]), backend="cuda", images=images_for(pack, entry, arch))
    if entry.get("kind") == "attention":  # one Q tile and a ragged one, three KV blocks
        from synth.emit.sm90.emulate import bf16_bits, bf16_value
        from synth.emit.sm90.emulate_attention import TOLERANCE, reference

        f = kern.facts
        rng = np.random.default_rng(0)
        xs = [rng.standard_normal((1, 1, n, f.head_dim)).astype(np.float32) for n in (f.bm + 8, 330, 330)]
        xs = [x.astype(np.float16) if f.dtype == "f16" else bf16_bits(x) for x in xs]
        o = kern(*xs)
        vals = [x.astype(np.float32) if f.dtype == "f16" else bf16_value(x) for x in xs]
        ref = reference(*vals, causal=f.causal, scale=f.head_dim ** -0.5)
        ok = bool(np.all(np.abs(o - ref) <= TOLERANCE[f.dtype] * (1 + np.abs(ref))))
        print(json.dumps({"name": name, "shape": [1, 1, f.bm + 8, 330], "ok": ok}))
        return 0 if ok else 1
    if entry["arch"] == "sm_90a":
        c = kern.config
        M, N, K = c.bm + 8, c.bn, max(c.stages + 1, c.split_k) * c.bk
    else:
        f = kern.facts
        M, N, K = f.BM + 8, f.BN, max(4, f.split_k) * f.BK
    rng = np.random.default_rng(0)
    A = rng.uniform(-1, 1, (M, K)).astype(np.float16)
    B = rng.uniform(-1, 1, (N, K)).astype(np.float16)
    C = kern(A, B)
    ref = A.astype(np.float64) @ B.astype(np.float64).T
    ok = bool(np.all(np.abs(C - ref) <= ATOL + RTOL * np.abs(ref)))
    print(json.dumps({"name": name, "shape": [M, N, K], "ok": ok}))
    return 0 if ok else 1


def run(pack: str, *, backend: str = "cuda", budget_s: float = 330.0, only=None, sanitizer: bool = True) -> int:
    """Check every folder of the pack (see the module docstring); the exit status. On the ``cuda`` backend the
    kernels go through CUDA Python (``SYNTH_GPU_BACKEND=cuda-python`` unless set) for this call only: the
    process's environment is as it was afterwards."""
    try:
        doc = read_pack(pack)
    except PackError as e:
        print(f"gpu_check: error: {e}\nfix: run 'python benchmarks/gpu_check.py prepare DIR' again", file=sys.stderr)
        return 2
    built = [f["name"] for f in doc["folders"]]
    missing = {f["name"]: f["reason"] for f in doc["not_built"]}
    unknown = [n for n in (only or []) if n not in built and n not in missing]
    if only is not None and (unknown or not only):
        print(f"gpu_check: error: --only: {', '.join(map(repr, unknown)) or 'no name'}: not a folder of the pack\n"
              f"fix: give one or more of: {', '.join(built + list(missing))}", file=sys.stderr)
        return 2
    if not built and not missing:
        print(f"gpu_check: error: {os.path.join(pack, 'manifest.json')}: the pack has no folders: nothing to check\n"
              "fix: run 'python benchmarks/gpu_check.py prepare DIR' again", file=sys.stderr)
        return 2
    set_here = backend == "cuda" and "SYNTH_GPU_BACKEND" not in os.environ
    if set_here:
        os.environ["SYNTH_GPU_BACKEND"] = "cuda-python"
    try:
        return _run(pack, doc, backend, budget_s, only, sanitizer)
    finally:
        if set_here:
            os.environ.pop("SYNTH_GPU_BACKEND", None)


def _run(pack: str, doc, backend: str, budget_s: float, only, sanitizer: bool) -> int:
    budget = Budget(budget_s)
    rep = Report(pack, backend, budget_s)
    env = Env(backend)
    try:
        rep.doc["environment"] = env.info()
        rep.doc["reference"] = ("torch float32 product on the GPU (TF32 off); attention: torch "
                                "scaled_dot_product_attention in float32" if env.gpu else
                                "numpy float64 product and softmax attention (torch is not importable here)"
                                if env.torch is None else
                                "numpy float64 product and softmax attention (torch sees no GPU)")
        if backend == "cuda" and not env.gpu:
            rep.skip("cuBLAS, the torch reference and 8192^3: torch is absent or sees no GPU (numpy is the "
                     "reference)")
        rep.save()
        data = Data(env)
        flush = (None, None)
        if backend == "cuda":
            fb = env.dev.alloc(FLUSH_BYTES)
            tbuf = env.torch.empty(FLUSH_BYTES // 4, dtype=env.torch.float32, device="cuda") if env.gpu else None
            flush = (lambda: env.dev.memset(fb, FLUSH_BYTES, 0x5A), tbuf)
        if backend == "emulator":
            rep.skip("4096^3, 8192^3, the more-tiles-than-SMs shape, attention's more-batch-x-heads-than-SMs and "
                     "timed shapes, timing and sanitizers: the emulator is for small shapes")
        folders = [f for f in doc["folders"] if only is None or f["name"] in only]
        for f in doc["not_built"]:  # prepare could not build it: reported, never OK
            if only is None or f["name"] in only:
                k = rep.kernel(f["name"], "-")
                k["load"] = f"not built: {f['reason']}"
                rep.save()
                print(line(k, 0.0), flush=True)
        cublas_cache: dict = {}
        for entry in folders:
            t0 = time.monotonic()
            k = run_kernel(pack, entry, env, data, rep, budget, cublas_cache, flush)
            print(line(k, time.monotonic() - t0), flush=True)
        if backend == "cuda" and sanitizer:
            if env.sanitizer is None:
                rep.skip("compute-sanitizer: not on this machine")
            elif budget.left() < 30:
                rep.skip("compute-sanitizer: budget")
            else:
                sanitize_all(pack, folders, env, rep, budget)
        rep.doc["status"] = "done"
    except BaseException as e:
        rep.doc["status"] = f"crashed: {type(e).__name__}: {e}"
        raise
    finally:
        rep.doc["finished"] = _now()
        rep.save()
    wrong, not_built = rep.doc["wrong"], rep.doc["not_built"]
    print(f"{len(rep.doc['kernels'])} kernels, {wrong} wrong, {not_built} not built, {len(rep.doc['skipped'])} "
          f"skipped; {rep.doc['elapsed_s']} s; report: {os.path.join(pack, 'report.md')}")
    return 1 if wrong or not_built else 0


def line(k: dict, seconds: float) -> str:
    good = sum(1 for c in k["correctness"] if c["status"] in ("ok", "refused"))
    if _not_built(k):
        return f"{k['name']:28s} NOT BUILT  {k['load'][len('not built: '):]}"
    res = {True: "OK", False: "WRONG", None: "SKIP"}[k["ok"]]
    perf = "  ".join(f"{_shape_label(t).replace('³', '^3')} {t['tflops_warm']:.1f}/{t['tflops_flushed']:.1f} TF/s " + (
        f"({_ref(t)[0]} {_ref(t)[1]:.1f}: {100 * t['tflops_warm'] / _ref(t)[1]:.0f}%)"
        if _ref(t)[1] else f"(no {_ref(t)[0]})") for t in k["timing"])
    why = "" if k["ok"] else f"  {k['load']}" if k["ok"] is None else "  " + "; ".join(
        [k["load"]] if str(k["load"]).startswith("refused") else
        [f"{c['what']}: {c.get('message', c['status'])}" for c in k["correctness"] if c["status"] not in ("ok", "refused")])
    return f"{k['name']:28s} {res:5s} {good}/{len(k['correctness'])} shapes  {perf}  ({seconds:.0f} s){why}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare", help="solve, precompile and pack the folders (no GPU needed)")
    p.add_argument("dir")
    p.add_argument("--reduced", action="store_true", help="one small sm_80 folder and the Hopper one (CI)")
    p.add_argument("--no-images", action="store_true", help="skip nvcc (the GPU side then compiles)")
    p.add_argument("--only", nargs="+", metavar="NAME", help="only these folders")
    p.add_argument("--time-limit", type=float, default=TIME_LIMIT, metavar="SECONDS",
                   help=f"seconds to solve and prove each folder (default {TIME_LIMIT:g}); one that runs out is "
                        "left out of the pack and named in its manifest")
    p.add_argument("--jobs", type=int, default=0, help="nvcc processes at once (default: the CPUs, at most 4)")
    p = sub.add_parser("run", help="check and time every folder of a pack")
    p.add_argument("dir")
    p.add_argument("--backend", choices=("cuda", "emulator"), default="cuda")
    p.add_argument("--budget", type=float, default=330.0, help="seconds for the whole run (default 330)")
    p.add_argument("--only", nargs="+", metavar="NAME", help="only these folders")
    p.add_argument("--no-sanitizer", action="store_true")
    p = sub.add_parser("one", help="(internal) one launch at a small shape, for compute-sanitizer")
    p.add_argument("dir")
    p.add_argument("name")
    a = ap.parse_args(argv)
    if a.cmd == "prepare":
        if not 0 <= a.jobs <= 64:
            ap.error("--jobs must be in 0 .. 64")
        try:
            man = prepare(a.dir, reduced=a.reduced, images=not a.no_images, time_limit=a.time_limit, only=a.only,
                          jobs=a.jobs)
        except PrepareError as e:
            print(f"gpu_check: error: {e.msg}" + (f"\nfix: {e.fix}" if e.fix else ""), file=sys.stderr)
            return e.status
        except OSError as e:
            print(f"gpu_check: error: {e}", file=sys.stderr)
            return 1
        if man["not_built"]:
            print(f"gpu_check: {len(man['not_built'])} folder(s) not built (the pack holds the others; 'run' reports "
                  f"these NOT BUILT): " + "; ".join(f"{x['name']}: {x['reason']}" for x in man["not_built"]),
                  file=sys.stderr)
            return 1
        return 0
    if a.cmd == "run":
        if not 1 <= a.budget <= 3600:
            ap.error("--budget must be in 1 .. 3600 seconds")
        return run(a.dir, backend=a.backend, budget_s=a.budget, only=a.only, sanitizer=not a.no_sanitizer)
    return one(a.dir, a.name)


if __name__ == "__main__":
    sys.exit(main())
