"""``synth check`` never runs the file it checks, and reads only regular files within their bound.

A TVMScript file is Python text, and TVM's own parser evaluates the Python
expressions it meets (decorator arguments, annotations, calls). Each case below
plants a payload that creates a marker file at one injection point of an
otherwise valid TVMScript pipeline; ``synth check`` must refuse it with a located
error (exit 2), and the marker must never appear. The payloads that TVM would have
evaluated (annotation, decorator argument, buffer shape, body calls) created the
marker before the screen (:mod:`synth.frontends.tvmscript`) existed.

The special-file cases: ``/dev/zero``, a FIFO, a folder, an oversized file and a
non-UTF-8 byte each give exit 2 at once (never a hang, never an out-of-memory kill).
"""

from __future__ import annotations

import contextlib
import io
import os
import pathlib
import re
import threading
import time

import pytest

from conftest import AT_ONCE_S
from synth.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[2]
BASE = (ROOT / "tests" / "check_inputs" / "tvm-stream-s2.py").read_text()
HEADER = "from tvm.script import ir as I\nfrom tvm.script import tirx as T\n"
LOCATED = re.compile(r":(\d+):(\d+): error: ")


def _run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["check", *args])
    return rc, out.getvalue(), err.getvalue()


def _payload(marker: pathlib.Path) -> str:
    return f"open({str(marker)!r}, 'w').close()"


def _inject(point: str, p: str, header: str = HEADER) -> str:
    """BASE (after ``header``) with payload ``p`` at injection point ``point``."""
    text = header + BASE
    sig = 'def main(X: T.Buffer((32, 16), "float32"), Y: T.Buffer((32, 16), "float32")):'
    assert sig in text
    edits = {
        "annotation": (sig, sig.replace('Y: T.Buffer((32, 16), "float32")',
                                        f'Y: T.Buffer((32, 16), ({p}) or "float32")')),
        "decorator argument": ("@T.prim_func(s_tir=True)", f"@T.prim_func(s_tir=({p}) is None)"),
        "module decorator argument": ("@I.ir_module", f"@I.ir_module(check_well_formed=({p}) is None)"),
        "default value": (sig, sig.replace('"float32")):', f'"float32") = {p}):')),
        "subscript in a type": (sig, sig.replace('Y: T.Buffer((32, 16), "float32")',
                                                 f'Y: T.Buffer[(32, 16), ({p}) or "float32"]')),
        "buffer shape expression": ('T.sblock_alloc_buffer((3, 32, 1), scope="shared")',
                                    f'T.sblock_alloc_buffer((3, 32, 1 + (0 if ({p}) is None else 0)), '
                                    'scope="shared")'),
        "global statement": ("@I.ir_module", f"{p}\n@I.ir_module"),
        "global statement in function": ("        # with T.sblock(\"root\"):",
                                         "        global X\n        # with T.sblock(\"root\"):"),
        "call in the body": ('T.reads(X[t, 0:16])', f'T.reads(X[t, 0:16 + len(str({p})) * 0])'),
        "lambda": ('T.where(k < 16)', f'T.where((lambda: {p})() is None and k < 16)'),
        "f-string": ('T.sblock("use")', f'T.sblock(f"{{{p}}}")'),
        "comprehension": ('T.reads(X[t, k])', f'T.reads(X[t, k], *[{p} for j in range(1)])'),
        "dunder chain": ('T.reads(X[t, k])',
                         'T.Buffer.__init__.__globals__["__builtins__"]["exec"]("' + p.replace('"', '\\"')
                         + '")\n                            T.reads(X[t, k])'),
        "walrus": ('T.where(k < 16)', f'T.where((z := {p}) is None and k < 16)'),
        "import in the header": ("@I.ir_module", f"import os; {p}\n@I.ir_module"),
        "attribute of a TVM namespace module": ('T.reads(X[t, k])', 'T.parser.entry.parse("x")\n'
                                                '                            T.reads(X[t, k])'),
    }
    old, new = edits[point]
    assert old in text, point
    return text.replace(old, new, 1)


POINTS = ["annotation", "decorator argument", "module decorator argument", "default value", "subscript in a type",
          "buffer shape expression", "global statement", "global statement in function", "call in the body",
          "lambda", "f-string", "comprehension", "dunder chain", "walrus", "import in the header",
          "attribute of a TVM namespace module"]


@pytest.mark.parametrize("header", ["imports", "as printed"])
@pytest.mark.parametrize("point", POINTS)
def test_tvmscript_payload_is_never_run(tmp_path, point, header):
    """With its imports (as written) and without (as mod.script() prints it: TVM's parser took that form
    before the screen, and ran the annotation, decorator, shape and body payloads)."""
    marker = tmp_path / "MARKER"
    f = tmp_path / "attack.py"
    f.write_text(_inject(point, _payload(marker), HEADER if header == "imports" else ""))
    rc, out, err = _run(str(f))
    assert not marker.exists(), f"{point}: the checked file ran"
    assert rc == 2, (point, rc, out, err)
    assert "Traceback" not in err
    m = LOCATED.search(err)
    assert m and err.startswith(str(f)), err
    assert int(m.group(1)) > 0
    assert "fix:" in err


def test_main_block_is_skipped_never_run(tmp_path):
    marker = tmp_path / "MARKER"
    f = tmp_path / "with_main.py"
    f.write_text(HEADER + BASE + f"\n\nif __name__ == \"__main__\":\n    {_payload(marker)}\n")
    rc, out, err = _run(str(f))
    assert not marker.exists()
    pytest.importorskip("tvm")
    assert rc == 0, err


# ---- special files -------------------------------------------------------------------------

def test_dev_zero_is_refused_at_once():
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    t0 = time.monotonic()
    rc, _, err = _run("/dev/zero")
    assert rc == 2 and "not a regular file" in err and "Traceback" not in err
    assert time.monotonic() - t0 < AT_ONCE_S


@pytest.mark.parametrize("command", ["check", "verify"])
def test_fifo_is_refused_without_blocking(tmp_path, command):
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    result: dict = {}

    def go():
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            result["rc"] = main([command, str(fifo)])
        result["err"] = err.getvalue()

    th = threading.Thread(target=go, daemon=True)
    th.start()
    th.join(AT_ONCE_S)
    if th.is_alive():  # unblock the reader so the test process can end
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        th.join(5)
        pytest.fail(f"synth {command} on a FIFO blocked")
    assert result["rc"] == 2 and "Traceback" not in result["err"], result


def test_oversized_and_non_utf8_inputs(tmp_path):
    from synth.frontends.check import MAX_BYTES

    big = tmp_path / "big.ttgir"
    with open(big, "wb") as fh:
        fh.truncate(MAX_BYTES + 1)
    rc, _, err = _run(str(big))
    assert rc == 2 and "MiB" in err
    bad = tmp_path / "bad.ttgir"
    bad.write_bytes(b"module {\n  tt.func @f() {\xff\n")
    rc, _, err = _run(str(bad))
    assert rc == 2 and f"{bad}:2:" in err and "UTF-8" in err


def test_a_name_may_not_shadow_a_dangerous_builtin(tmp_path):
    """TVM's parser looks up a name used before its binding (an annotation naming a later variable) among
    Python's builtins: a variable named ``open`` or ``eval`` would hand TVM the builtin itself."""
    sig = 'Y: T.Buffer((32, 16), "float32")):'
    text = (HEADER + BASE).replace(sig, 'Y: T.Buffer((32, eval), "float32")):\n        eval = T.int32()', 1)
    f = tmp_path / "shadow.py"
    f.write_text(text)
    rc, _, err = _run(str(f))
    assert rc == 2 and "is a Python builtin" in err and LOCATED.search(err), err
