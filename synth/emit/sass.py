"""Read the machine code of a kernel: compile with nvcc/ptxas, disassemble with
``cuobjdump -sass``, find the main loop and measure it (no GPU needed).

Input: CUDA C++ text (or PTX), an arch. Output: :class:`Compiled` (ptxas's
registers, spills, stack, static shared memory and the SASS) and, for the
main loop (the backward branch holding the most ``HMMA``), a
:class:`LoopStats` per k-tile: the figures of ``benchmarks/sass_vs_cutlass.py``
and ``docs/cuda_kernel.md`` section 6.

Public API (the GEMM search imports :func:`kernel_mix`):

* :func:`compile_cuda` / :func:`compile_ptx` -> :class:`Compiled` (cached on disk);
* :func:`parse_sass` -> ``list[Insn]``; :func:`main_loop` -> the loop's ``Insn``;
* :func:`loop_stats` -> :class:`LoopStats`;
* :func:`kernel_mix` (problem, schedule, program) -> :class:`LoopStats` of the
  emitted ``kernel.cu``.

Every figure is a static proxy read from the binary, not a timing.
"""

from __future__ import annotations

import glob
import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Optional, Sequence

from ..errors import SynthError
from ..gemm import tiling
from .cuda import emit_kernel

NVCC_FLAGS = ("-O3", "-Xptxas", "-v")
"""Flags every kernel is compiled with (besides ``-arch``, ``-cubin`` and the caller's)."""
INT_OPS = frozenset({
    "IADD3", "IADD", "IMAD", "IMUL", "LEA", "SHF", "SHL", "SHR", "LOP3", "LOP", "ISETP", "SEL", "MOV", "IMNMX",
    "IABS", "PRMT", "SGXT", "BMSK", "POPC", "FLO", "BREV", "P2R", "R2P", "PLOP3", "S2R", "CS2R", "R2UR",
    "VIADD", "VIADDMNMX", "IDP", "ISCADD", "LDC", "PLOP",
})
"""Integer/address/predicate opcodes of the vector datapath (the part before the first dot)."""
UNIFORM_OPS = frozenset({"UIADD3", "UIMAD", "ULEA", "USHF", "ULOP3", "UISETP", "USEL", "UMOV", "ULDC", "UPRMT",
                         "S2UR", "UFLO", "UPOPC", "UPLOP3", "ULOP", "USHL", "USHR", "UIMNMX"})
"""Uniform-datapath opcodes (one per warp, beside the vector pipes)."""


class SassError(SynthError):
    """nvcc/ptxas/cuobjdump failed or the SASS has no main loop."""

    def __init__(self, msg: str, fix: str = "") -> None:
        super().__init__(None, msg, fix)


def tool(name: str) -> Optional[str]:
    """Path of a CUDA tool (``nvcc``, ``ptxas``, ``cuobjdump``): PATH first, then the
    ``nvidia-cuda-*`` wheels of this Python."""
    found = shutil.which(name)
    if found:
        return found
    for root in sys.path:
        hits = glob.glob(os.path.join(root, "nvidia", "*", "bin", name)) + \
            glob.glob(os.path.join(root, "nvidia", "*", "*", "bin", name))
        if hits:
            return hits[0]
    return None


def cache_dir() -> pathlib.Path:
    """``$SYNTH_SASS_CACHE`` or ``~/.cache/synth/sass``."""
    env = os.environ.get("SYNTH_SASS_CACHE")
    return pathlib.Path(env) if env else pathlib.Path.home() / ".cache" / "synth" / "sass"


@dataclass(frozen=True)
class Compiled:
    """One compiled kernel (the first ``__global__`` function ptxas reports)."""

    registers: int
    spill_stores: int
    spill_loads: int
    stack: int
    static_smem: int
    log: str
    """ptxas -v output."""
    sass: str
    """``cuobjdump -sass`` of the cubin."""


def _version(exe: str) -> str:
    try:
        return subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60).stdout
    except OSError:  # pragma: no cover
        return ""


def _cached(key_parts: Sequence[str], build) -> Compiled:
    h = hashlib.sha256("\0".join(key_parts).encode()).hexdigest()[:24]
    d = cache_dir() / h
    log_p, sass_p = d / "ptxas.log", d / "kernel.sass"
    if not (log_p.exists() and sass_p.exists()):
        log, sass = build()
        d.mkdir(parents=True, exist_ok=True)
        tmp = pathlib.Path(tempfile.mkdtemp(dir=d))
        (tmp / "ptxas.log").write_text(log)
        (tmp / "kernel.sass").write_text(sass)
        os.replace(tmp / "ptxas.log", log_p)
        os.replace(tmp / "kernel.sass", sass_p)
        shutil.rmtree(tmp, ignore_errors=True)
    return _figures(log_p.read_text(), sass_p.read_text())


def _figures(log: str, sass: str) -> Compiled:
    regs = re.search(r"Used (\d+) registers", log)
    spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    stack = re.search(r"(\d+) bytes stack frame", log)
    smem = re.search(r"(\d+) bytes smem", log)
    if not (regs and spill and stack):
        raise SassError(f"ptxas -v printed no resource usage:\n{log[-2000:]}")
    return Compiled(int(regs.group(1)), int(spill.group(1)), int(spill.group(2)), int(stack.group(1)),
                    int(smem.group(1)) if smem else 0, log, sass)


def _disassemble(cubin: str) -> str:
    cuobjdump = tool("cuobjdump")
    if cuobjdump is None:
        raise SassError("cuobjdump not found", "pip install nvidia-cuda-cuobjdump")
    proc = subprocess.run([cuobjdump, "-sass", cubin], capture_output=True, text=True, timeout=300)
    if proc.returncode:
        raise SassError(f"cuobjdump failed: {proc.stderr[-2000:]}")
    return proc.stdout


def compile_cuda(text: str, arch: str = "sm_80", flags: Sequence[str] = (),
                 include_dirs: Sequence[str] = ()) -> Compiled:
    """Compile CUDA C++ ``text`` to a cubin for ``arch`` with ``nvcc -cubin`` and
    :data:`NVCC_FLAGS` plus ``flags``; cached by the text, flags, include paths
    and the nvcc version. Raises :class:`SassError` when nvcc fails."""
    nvcc = tool("nvcc")
    if nvcc is None:
        raise SassError("nvcc is not on PATH", "install the CUDA toolkit (nvcc 12 or newer)")
    args = [f"-arch={arch}", "-cubin", *NVCC_FLAGS, *flags, *(f"-I{d}" for d in include_dirs)]

    def build():
        with tempfile.TemporaryDirectory(prefix="synth-sass-") as d:
            src, cubin = os.path.join(d, "kernel.cu"), os.path.join(d, "kernel.cubin")
            pathlib.Path(src).write_text(text)
            proc = subprocess.run([nvcc, *args, "-o", cubin, src], capture_output=True, text=True, timeout=900)
            if proc.returncode:
                raise SassError(f"nvcc failed:\n{proc.stderr[-4000:]}", "fix the kernel source")
            return proc.stderr + proc.stdout, _disassemble(cubin)

    return _cached(["cuda", text, *args, _version(nvcc)], build)


def compile_ptx(ptx: str, arch: str = "sm_80", flags: Sequence[str] = ()) -> Compiled:
    """Assemble PTX (e.g. Triton's) with ``ptxas -O3 -v`` for ``arch`` (cached)."""
    ptxas = tool("ptxas")
    if ptxas is None:
        raise SassError("ptxas is not on PATH", "install the CUDA toolkit")
    args = [f"-arch={arch}", "-O3", "-v", *flags]

    def build():
        with tempfile.TemporaryDirectory(prefix="synth-sass-") as d:
            src, cubin = os.path.join(d, "kernel.ptx"), os.path.join(d, "kernel.cubin")
            pathlib.Path(src).write_text(ptx)
            proc = subprocess.run([ptxas, *args, "-o", cubin, src], capture_output=True, text=True, timeout=900)
            if proc.returncode:
                raise SassError(f"ptxas failed:\n{proc.stderr[-4000:]}")
            return proc.stderr + proc.stdout, _disassemble(cubin)

    return _cached(["ptx", ptx, *args, _version(ptxas)], build)


# ---------------------------------------------------------------------------
# parsing


_INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_REG = re.compile(r"\bR(\d+)\b")


@dataclass(frozen=True)
class Insn:
    """One SASS instruction: ``@P0 LDGSTS.E.BYPASS.128 [R5], [R2.64], P1``."""

    addr: int
    pred: str
    """Guard (``@P0``, ``@!P1``) or ''."""
    opcode: str
    """Full opcode with modifiers (``DEPBAR.LE``)."""
    operands: str

    @property
    def op(self) -> str:
        """The opcode before its first dot (``LDGSTS``)."""
        return self.opcode.split(".")[0]

    @property
    def text(self) -> str:
        return " ".join(x for x in (self.pred, self.opcode, self.operands) if x)


def parse_sass(sass: str, function: Optional[str] = None) -> list[Insn]:
    """The instructions of ``function`` (a substring of its mangled name; None: the
    first function in the listing)."""
    chunks = re.split(r"\n\s*Function : ", "\n" + sass)
    bodies = [c for c in chunks[1:] if function is None or function in c.split("\n", 1)[0]]
    if not bodies:
        raise SassError(f"no function {function!r} in the SASS")
    out = []
    for addr, ins in _INSN.findall(bodies[0]):
        pred = ""
        m = re.match(r"(@!?U?P[T0-9]+)\s+(.*)$", ins)
        if m:
            pred, ins = m.group(1), m.group(2)
        opcode, _, operands = ins.partition(" ")
        out.append(Insn(int(addr, 16), pred, opcode, operands.strip()))
    return out


def backward_loops(insns: Sequence[Insn]) -> list[list[Insn]]:
    """Every loop of the listing: for each backward ``BRA``, the instructions from its target to it."""
    loops = []
    for ins in insns:
        if ins.op != "BRA":
            continue
        m = re.search(r"(0x[0-9a-f]+)", ins.operands)
        if not m or int(m.group(1), 16) >= ins.addr:
            continue
        lo = int(m.group(1), 16)
        loops.append([x for x in insns if lo <= x.addr <= ins.addr])
    return loops


def main_loop(insns: Sequence[Insn]) -> list[Insn]:
    """The instructions of the innermost loop holding the most ``HMMA`` (from its header, the target of its
    backward branches, to its last backward branch). Innermost: a loop around another ``HMMA`` loop (stream-K's
    segment loop, a persistent kernel's tile loop) is not the main loop. Raises :class:`SassError` when no
    loop holds an HMMA."""
    by_header: dict[int, list[Insn]] = {}
    for body in backward_loops(insns):  # several back edges to one header (a continue) are one loop
        if len(body) > len(by_header.get(body[0].addr, [])):
            by_header[body[0].addr] = body
    hmma = {h: sum(1 for x in b if x.op == "HMMA") for h, b in by_header.items()}
    loops = [b for h, b in by_header.items() if hmma[h]]
    inner = [b for b in loops
             if not any(o is not b and b[0].addr <= o[0].addr and o[-1].addr <= b[-1].addr for o in loops)]
    if not inner:
        raise SassError("no loop with HMMA instructions in the SASS")
    return max(inner, key=lambda b: hmma[b[0].addr])


def _regs(operand: str, width: int) -> set[int]:
    m = _REG.search(operand)
    if not m or operand.strip().startswith("RZ"):
        return set()
    r = int(m.group(1))
    return set(range(r, r + width))


def _ldsm_width(opcode: str) -> int:
    m = re.search(r"\.M88\.(\d)", opcode)
    return int(m.group(1)) if m else 1


def _operands(ins: Insn) -> list[str]:
    return [x.strip() for x in ins.operands.split(",")]


# ---------------------------------------------------------------------------
# figures


@dataclass(frozen=True)
class LoopStats:
    """Main-loop figures, per k-tile where a count (``ktiles`` k-tiles per loop iteration)."""

    ktiles: float
    """k-tiles one loop iteration computes (HMMA count / ``hmma_per_ktile``)."""
    instructions: int
    """Live instructions per iteration: NOP and never-executed ``@!PT`` ones excluded."""
    hmma: int
    ldsm: int
    ldgsts: int
    int_ops: int
    """Integer/address/predicate instructions (:data:`INT_OPS`) per iteration."""
    uniform_ops: int
    """Uniform-datapath instructions (:data:`UNIFORM_OPS`) per iteration."""
    bar_sync: int
    depbar: tuple[int, ...]
    """Immediates of ``DEPBAR.LE SB0, N`` in loop order."""
    per_hmma: float
    """Live instructions per HMMA."""
    longest_hmma_free: int
    """Longest run of live instructions with no HMMA (cyclic over the loop)."""
    min_ldsm_to_use: Optional[int]
    """Fewest HMMAs between an LDSM and the first HMMA reading a register it wrote (cyclic);
    None when no LDSM feeds an HMMA in the loop."""
    max_ldgsts_run_share: float
    """Largest share of the iteration's LDGSTS inside one HMMA-free run (0 when none)."""
    order: tuple[str, ...] = field(repr=False)
    """The loop's LDGSTS, LDSM, HMMA, DEPBAR, BAR.SYNC and LDGDEPBAR in order (mnemonics)."""

    def per_ktile(self, n: int) -> float:
        return n / self.ktiles if self.ktiles else float("nan")


ORDER_OPS = ("LDGSTS", "LDSM", "HMMA", "DEPBAR", "BAR", "LDGDEPBAR")


def loop_stats(loop: Sequence[Insn], hmma_per_ktile: Optional[int] = None) -> LoopStats:
    """Figures of a main loop (:func:`main_loop`). ``hmma_per_ktile``: HMMAs of one
    warp per k-tile (``MI * NI * KI``), to scale counts to k-tiles (None: one
    k-tile per iteration)."""
    live = [x for x in loop if x.op != "NOP" and x.pred != "@!PT"]
    hm = [k for k, x in enumerate(live) if x.op == "HMMA"]
    n = len(live)
    longest, runs = 0, []
    if hm:
        for a, b in zip(hm, hm[1:] + [hm[0] + n]):
            run = [live[j % n] for j in range(a + 1, b)]
            runs.append(run)
            longest = max(longest, len(run))
    else:
        runs, longest = [live], n
    ldg = sum(1 for x in live if x.op == "LDGSTS")
    share = max((sum(1 for x in r if x.op == "LDGSTS") for r in runs), default=0) / ldg if ldg else 0.0
    # LDSM -> first HMMA reading one of its registers, counting HMMAs in between (one lap at most)
    dist = None
    for k, x in enumerate(live):
        if x.op != "LDSM":
            continue
        dst = _regs(_operands(x)[0], _ldsm_width(x.opcode))
        between = 0
        for j in range(1, n):
            y = live[(k + j) % n]
            if y.op == "HMMA":
                ops = _operands(y)
                if len(ops) >= 3 and (dst & (_regs(ops[1], 4) | _regs(ops[2], 2))):
                    dist = between if dist is None else min(dist, between)
                    break
                between += 1
            elif y.op == "LDSM" and _regs(_operands(y)[0], _ldsm_width(y.opcode)) & dst:
                break
    dep = tuple(int(m.group(1), 0) for x in live if x.opcode.startswith("DEPBAR")
                and (m := re.search(r"SB0,\s*(0x[0-9a-f]+|\d+)", x.operands)))
    kt = len(hm) / hmma_per_ktile if hmma_per_ktile else 1.0
    order = tuple(x.op for x in live if x.op in ORDER_OPS)
    return LoopStats(kt, n, len(hm), sum(1 for x in live if x.op == "LDSM"), ldg,
                     sum(1 for x in live if x.op in INT_OPS), sum(1 for x in live if x.op in UNIFORM_OPS),
                     sum(1 for x in live if x.op == "BAR"),
                     dep, n / len(hm) if hm else float("inf"), longest, dist, share, order)


def stg_widths(insns: Sequence[Insn]) -> dict[int, int]:
    """Global stores of a whole kernel by width in bits: ``{128: 64, 32: 0, ...}``."""
    out: dict[int, int] = {}
    for x in insns:
        if x.op == "STG":
            m = re.search(r"\.(128|64|U16|U8|S16|S8)\b", x.opcode)
            w = {"128": 128, "64": 64}.get(m.group(1), 16) if m else 32
            out[w] = out.get(w, 0) + 1
    return out


def kernel_mix(problem, schedule, program, arch: str = "sm_80") -> LoopStats:
    """Compile the ``kernel.cu`` :func:`synth.emit.cuda.emit_kernel` writes for a gemm
    problem and return its main loop's :class:`LoopStats` (per k-tile via
    ``hmma_per_ktile = MI * NI * KI``). Cached: a second call with the same
    kernel costs no compile. Raises :class:`SassError` without nvcc/cuobjdump."""
    text = emit_kernel(problem, schedule, program)
    comp = compile_cuda(text, arch)
    t = tiling(problem.gemm)
    return loop_stats(main_loop(parse_sass(comp.sass)), t.MI * t.NI * t.KI)


# ---------------------------------------------------------------------------
# control flow and the attention consumer's main loop (sm_90a)


_TARGET = re.compile(r"\b(0x[0-9a-f]+)\s*$")


def _branch_target(ins: Insn) -> Optional[int]:
    """The address a ``BRA`` (any modifier: ``.U``, ``.DIV``, ``.U.ANY``) jumps to, None when it names none."""
    if ins.op != "BRA":
        return None
    m = _TARGET.search(ins.operands)
    return int(m.group(1), 16) if m else None


def _ends_block(ins: Insn) -> bool:
    return ins.op in ("BRA", "EXIT", "RET", "BRX", "JMX", "JMP", "CALL")


def _falls_through(ins: Insn) -> bool:
    """Whether control may reach the next instruction: anything but an unguarded jump, exit or return (a
    ``BRA.DIV`` / ``BRA.U.ANY`` is taken by some threads only)."""
    if ins.op in ("BRA", "EXIT", "RET", "BRX", "JMX", "JMP"):
        return bool(ins.pred) or ".DIV" in ins.opcode or ".ANY" in ins.opcode
    return True


def natural_loops(insns: Sequence[Insn]) -> list[list[Insn]]:
    """The loops of the listing whose back edge is a natural loop's: a ``BRA`` to an earlier address whose target's
    basic block dominates the branch's (every path from the function's entry to the branch passes the target). Each
    is returned as :func:`backward_loops` does, the instructions from the target to the branch in address order.

    An sm_90a kernel's ``mbarrier.try_wait`` retry blocks sit after the function's body and jump back into the code
    that called them; such a jump lands at an address no path reaches the retry block through, so it is not a loop
    (:func:`backward_loops` counts it, from its target to the end of the listing)."""
    if not insns:
        return []
    addrs = [x.addr for x in insns]
    index = {a: k for k, a in enumerate(addrs)}
    leaders = {0}
    for k, x in enumerate(insns):
        t = _branch_target(x)
        if t is not None and t in index:
            leaders.add(index[t])
        if _ends_block(x) and k + 1 < len(insns):
            leaders.add(k + 1)
    starts = sorted(leaders)
    block_of = {}
    for b, s in enumerate(starts):
        end = starts[b + 1] if b + 1 < len(starts) else len(insns)
        for k in range(s, end):
            block_of[k] = b
    nb = len(starts)
    succ: list[set[int]] = [set() for _ in range(nb)]
    for b, s in enumerate(starts):
        last = (starts[b + 1] if b + 1 < len(starts) else len(insns)) - 1
        x = insns[last]
        t = _branch_target(x)
        if t is not None and t in index and x.pred != "@!PT":
            succ[b].add(block_of[index[t]])
        if (x.pred == "@!PT" or _falls_through(x)) and last + 1 < len(insns):
            succ[b].add(block_of[last + 1])
    preds: list[set[int]] = [set() for _ in range(nb)]
    for b in range(nb):
        for c in succ[b]:
            preds[c].add(b)
    reach, todo = {0}, [0]
    while todo:
        for c in succ[todo.pop()]:
            if c not in reach:
                reach.add(c)
                todo.append(c)
    full = (1 << nb) - 1
    dom = [full] * nb
    dom[0] = 1
    changed = True
    while changed:
        changed = False
        for b in sorted(reach - {0}):
            d = full
            for p in preds[b]:
                if p in reach:
                    d &= dom[p]
            d |= 1 << b
            if d != dom[b]:
                dom[b], changed = d, True
    loops = []
    for k, x in enumerate(insns):
        t = _branch_target(x)
        if t is None or t not in index or t >= x.addr or block_of[k] not in reach:
            continue
        h = block_of[index[t]]
        if dom[block_of[k]] >> h & 1:
            loops.append([y for y in insns if t <= y.addr <= x.addr])
    return loops


def attention_loop(insns: Sequence[Insn]) -> list[Insn]:
    """The consumer main loop of an attention kernel: the innermost natural loop (:func:`natural_loops`; several back
    edges to one header are one loop, from the header to its last back edge) holding the most ``HGMMA``, the fewer
    instructions on a tie. Innermost: a loop around another loop with HGMMA (a persistent kernel's tile loop) is not
    it. Raises :class:`SassError` when no loop holds an HGMMA."""
    by_header: dict[int, list[Insn]] = {}
    for body in natural_loops(insns):
        if len(body) > len(by_header.get(body[0].addr, [])):
            by_header[body[0].addr] = body
    hg = {h: sum(1 for x in b if x.op == "HGMMA") for h, b in by_header.items()}
    loops = [b for h, b in by_header.items() if hg[h]]
    inner = [b for b in loops
             if not any(o is not b and b[0].addr <= o[0].addr and o[-1].addr <= b[-1].addr for o in loops)]
    if not inner:
        raise SassError("no loop with HGMMA instructions in the SASS")
    return max(inner, key=lambda b: (hg[b[0].addr], -len(b)))


@dataclass(frozen=True)
class AttentionLoopStats:
    """Figures of an attention consumer's main loop (:func:`attention_loop`), per KV block where a rate."""

    blocks: float
    """KV blocks one loop iteration computes: the loop's HGMMA over ``hgmma_per_block``."""
    instructions: int
    """Live instructions per iteration (NOP and never-executed ``@!PT`` ones excluded)."""
    hgmma: int
    per_hgmma: float
    """Live instructions per HGMMA."""
    longest_hgmma_free: int
    """Longest run of live instructions with no HGMMA, wrapping around the loop."""
    ex2_per_block: float
    """``MUFU.EX2`` per KV block (the softmax's exponentials and the rescale factors)."""
    shfl_per_block: float
    """``SHFL`` per KV block (the row max and row sum reductions across a row's threads)."""
    mufu_per_block: float
    """Every ``MUFU`` per KV block."""
    syncs_per_block: float
    """``SYNCS`` (mbarrier waits and arrives) per KV block."""
    bar_per_block: float
    """``BAR`` (named barriers: the warp groups' ordering) per KV block."""
    hgmma_shapes: tuple[str, ...]
    """The loop's HGMMA shapes (``64x176x16``), sorted."""
    local: int = 0
    """Local-memory loads and stores (``LDL``, ``STL``: spill traffic) per iteration."""
    wgmma_waits_per_block: float = 0.0
    """``WARPGROUP.DEPBAR`` (``wgmma.wait_group``, the kernel's or ptxas's) per KV block: 2 when each GEMM of a block
    is waited once; one per HGMMA when every wgmma is serialized."""
    wgmma_arrives_per_block: float = 0.0
    """``WARPGROUP.ARRIVE`` (``wgmma.fence``) per KV block."""


def attention_stats(loop: Sequence[Insn], hgmma_per_block: int) -> AttentionLoopStats:
    """Figures of an attention main loop; ``hgmma_per_block``: HGMMAs one consumer warp group issues per KV block
    (``d / 16`` for ``S = Q K^T`` plus ``BN / 16`` for ``O += P V`` with k16 instructions)."""
    live = [x for x in loop if x.op != "NOP" and x.pred != "@!PT"]
    hg = [k for k, x in enumerate(live) if x.op == "HGMMA"]
    n = len(live)
    if hg:
        longest = max(b - a - 1 for a, b in zip(hg, hg[1:] + [hg[0] + n]))
    else:
        longest = n
    blocks = len(hg) / hgmma_per_block if hgmma_per_block > 0 else 0.0

    def rate(count: int) -> float:
        return count / blocks if blocks else float("nan")

    shapes = sorted({x.opcode.split(".")[1] for x in live if x.op == "HGMMA" and "." in x.opcode})
    return AttentionLoopStats(
        blocks, n, len(hg), n / len(hg) if hg else float("inf"), longest,
        rate(sum(1 for x in live if x.op == "MUFU" and ".EX2" in x.opcode)),
        rate(sum(1 for x in live if x.op == "SHFL")),
        rate(sum(1 for x in live if x.op == "MUFU")),
        rate(sum(1 for x in live if x.op == "SYNCS")),
        rate(sum(1 for x in live if x.op == "BAR")),
        tuple(shapes), sum(1 for x in live if x.op in ("LDL", "STL")),
        rate(sum(1 for x in live if x.opcode.startswith("WARPGROUP.DEPBAR"))),
        rate(sum(1 for x in live if x.opcode.startswith("WARPGROUP.ARRIVE"))))


@dataclass(frozen=True)
class WgmmaDiagnostics:
    """What ptxas says about a kernel's wgmma pipeline (its ``-v`` log, sm_90a)."""

    serialized: str
    """The reason ptxas gives for serializing every ``wgmma.mma_async`` of a function (message C7515), '' when it
    does not."""
    injected_waits: int
    """``warpgroup.wait`` instructions ptxas injected so that other instructions may use registers a wgmma defines
    (message C7517)."""


def wgmma_diagnostics(log: str) -> WgmmaDiagnostics:
    """The wgmma messages of a ptxas ``-v`` log (:attr:`Compiled.log`)."""
    m = re.search(r"\(C7515\)[^\n]*?serialized due to ([^\n]*?)(?: in the function|$)", log, re.M)
    return WgmmaDiagnostics(m.group(1).strip() if m else "", len(re.findall(r"\(C7517\)", log)))


def setmaxnreg_targets(insns: Sequence[Insn]) -> tuple[tuple[str, int], ...]:
    """The ``setmaxnreg`` requests of a kernel, ``(("dealloc", 24), ("alloc", 240))``: each ``USETMAXREG``'s kind
    (``alloc`` for ``.TRY_ALLOC``, else ``dealloc``) and register count, distinct, in listing order."""
    out: list[tuple[str, int]] = []
    for x in insns:
        if x.op != "USETMAXREG":
            continue
        m = _TARGET.search(x.operands)
        if not m:
            continue
        item = ("alloc" if "ALLOC" in x.opcode and "DEALLOC" not in x.opcode else "dealloc", int(m.group(1), 16))
        if item not in out:
            out.append(item)
    return tuple(out)


__all__ = ["Compiled", "Insn", "LoopStats", "SassError", "compile_cuda", "compile_ptx", "parse_sass", "main_loop",
           "backward_loops",
           "loop_stats", "stg_widths", "kernel_mix", "natural_loops", "attention_loop", "AttentionLoopStats",
           "attention_stats", "setmaxnreg_targets", "WgmmaDiagnostics", "wgmma_diagnostics", "tool", "cache_dir", "INT_OPS", "UNIFORM_OPS", "NVCC_FLAGS", "ORDER_OPS"]
