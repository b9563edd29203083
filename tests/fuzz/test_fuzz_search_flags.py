"""Fuzz target: ``synth search gemm`` flags, in-process.

Random combinations of odd flag values (sizes out of range or not numbers, ``--top``
far too large, scheduler addresses that are not addresses, ``--shapes`` naming a
FIFO, ``/dev/zero``, a folder, a file that is not UTF-8 or too large, ``--out``
naming a file): every run answers exit 0, 1 or 2 within a time bound, with no
traceback. A few examples by default; ``SYNTH_HYPOTHESIS=explore`` runs many more.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from conftest import AT_ONCE_S
from synth.bounds import MAX_SHAPES_BYTES

from tests.fuzz.harness import run_cli

EXPLORE = os.environ.get("SYNTH_HYPOTHESIS") == "explore"
SECONDS = 120.0
"""Time bound of one search (a 1 s search and one written folder take a few seconds)."""


def _files(d) -> dict:
    """Named files for --shapes and --out."""
    fifo = d / "shapes.fifo"
    os.mkfifo(fifo)
    (d / "plain.txt").write_text("not a folder\n")
    (d / "ok.csv").write_text("M,N,K\n128,128,128\n")
    (d / "bad_utf8.csv").write_bytes(b"M,N,K\n12\xff8,128,128\n")
    (d / "bad_numbers.csv").write_text("M,N,K\n0,-1,x\n")
    (d / "huge_number.csv").write_text("M,N,K\n" + "9" * 5000 + ",1,1\n")
    (d / "no_header.csv").write_text("128,128,128\n")
    (d / "many.csv").write_text("M,N,K\n" + "128,128,128\n" * 1100)
    (d / "quote.csv").write_text('M,N,K\n"128,128,128\n')
    with open(d / "big.csv", "wb") as fh:
        fh.truncate(MAX_SHAPES_BYTES + 1)
    return {"fifo": str(fifo), "zero": "/dev/zero", "folder": str(d), "missing": str(d / "nope.csv"),
            "plain": str(d / "plain.txt"), "under_plain": str(d / "plain.txt" / "x"), "fresh": str(d / "fresh"),
            **{k: str(d / f"{k}.csv") for k in ("ok", "bad_utf8", "bad_numbers", "huge_number", "no_header",
                                                  "many", "quote", "big")}}


SIZES = [None, "128", "0", "-1", "10000000", "abc", "1e3", "9" * 30]
TOPS = [None, "0", "-5", "1", "17", "1000000", "x"]
SCHEDULERS = [None, "not-a-url", "tcp://", "tcp://[::1]:99999", "host:port", "a" * 5000, "tcp://h:0",
              "inproc://x", "\u00e9:1"]
SHAPES = [None, "fifo", "zero", "folder", "missing", "ok", "bad_utf8", "bad_numbers", "huge_number", "no_header",
          "many", "quote", "big"]
OUTS = [None, "plain", "under_plain", "fresh", "folder"]


@st.composite
def search_argv(draw, files: dict):
    argv = ["search", "gemm", "--no-sass", "--time-limit", draw(st.sampled_from(["1", "0", "-1", "nan", "1e308"]))]
    shapes = draw(st.sampled_from(SHAPES))
    if shapes is not None:
        argv += ["--shapes", files[shapes]]
    if shapes is None or draw(st.booleans()):
        for k in ("--M", "--N", "--K"):
            v = draw(st.sampled_from(SIZES))
            if v is not None:
                argv += [k, v]
    for flag, pool in (("--top", TOPS), ("--scheduler", SCHEDULERS), ("--workers", [None, "0", "-1", "10000000"]),
                       ("--arch", [None, "sm_99", "", "sm_90"]), ("--dtype", [None, "f64", "x"])):
        v = draw(st.sampled_from(pool))
        if v is not None:
            argv += [flag, v]
    out = draw(st.sampled_from(OUTS))
    if out is not None:
        argv += ["--out", files[out]]
    if draw(st.booleans()):
        argv.append("--json")
    return argv


@settings(max_examples=300 if EXPLORE else 15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_search_flag_combinations(tmp_path_factory, data):
    files = _files(tmp_path_factory.mktemp("s"))
    argv = data.draw(search_argv(files))
    rc, out, err = run_cli(argv, SECONDS)
    event(f"search exit {rc}")
    assert rc in (0, 1, 2), (argv, rc, err[-3000:])
    assert "Traceback" not in err, (argv, err[-3000:])


@pytest.mark.parametrize("args, needle", [
    (["--M", "128", "--N", "128", "--K", "128", "--top", "1000000"], "--top 1000000 is above the maximum"),
    (["--shapes", "ok", "--scheduler", "not-a-url"], "is not a scheduler address"),
    (["--shapes", "zero"], "not a regular file"),
    (["--shapes", "fifo"], "not a regular file"),
    (["--shapes", "bad_utf8"], "not UTF-8"),
    (["--shapes", "big"], "allowed"),
    (["--shapes", "many"], "more than 1024 shapes"),
    (["--M", "128", "--N", "128", "--K", "128", "--top", "1", "--out", "plain"], "--out is a file"),
    (["--M", "128", "--N", "128", "--K", "128", "--top", "1", "--out", "under_plain"], "is a file"),
])
def test_search_flags_answer_at_once(tmp_path, args, needle):
    """Each class the fuzzing found: a located error in well under a second (no search runs)."""
    files = _files(tmp_path)
    argv = ["search", "gemm", "--no-sass"] + [files.get(a, a) if i and args[i - 1] in ("--shapes", "--out") else a
                                              for i, a in enumerate(args)]
    rc, _, err = run_cli(argv, seconds=AT_ONCE_S)
    assert rc == 2 and needle in err and "Traceback" not in err, err
