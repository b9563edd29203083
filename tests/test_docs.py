"""The contract pages in docs/: their examples run, their links stay in the repository, their tables match the code."""

from __future__ import annotations

import contextlib
import io
import os
import re

import pytest

from conftest import ROOT
from synth import __version__
from synth.cli import build_parser
from synth.envelope import CODES

DOCS = ROOT / "docs"
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
PAGES = sorted(DOCS.glob("*.md")) + [ROOT / "README.md", ROOT / "CHANGELOG.md"]


def python_blocks(page) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", page.read_text(), re.M | re.S)


@pytest.mark.slow
def test_api_examples_run(tmp_path, monkeypatch):
    """Every ```python block of docs/api.md, in order, each in a fresh namespace, in a folder with problems/."""
    blocks = python_blocks(DOCS / "api.md")
    assert len(blocks) >= 5
    os.symlink(ROOT / "problems", tmp_path / "problems")
    monkeypatch.chdir(tmp_path)
    shown = printed_output(DOCS / "api.md")
    assert shown, "docs/api.md shows no example output"
    for n, code in enumerate(blocks):
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(code, f"docs/api.md block {n + 1}", "exec"), {"__name__": "__docs__"})
        except Exception as exc:  # name the block that broke
            raise AssertionError(f"docs/api.md python block {n + 1} failed: {exc!r}") from exc
        if n in shown:  # what the page says it prints, durations aside
            assert same_output(out.getvalue(), shown[n]), (n + 1, out.getvalue(), shown[n])
    assert (tmp_path / "out" / "two-stage" / "program.json").exists()


def printed_output(page) -> dict[int, str]:
    """``{python block index: the text block that follows it}``: what the page says the example prints."""
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", page.read_text(), re.M | re.S)
    out, n = {}, -1
    for k, (lang, body) in enumerate(blocks):
        if lang == "python":
            n += 1
            if k + 1 < len(blocks) and blocks[k + 1][0] == "text":
                out[n] = blocks[k + 1][1]
    return out


def same_output(got: str, shown: str) -> bool:
    """``got`` is ``shown`` line for line, where a duration (``1.16 s``) may be any duration."""
    pattern = "\n".join(re.escape(line).replace(r"\ s", " s") for line in shown.rstrip("\n").split("\n"))
    pattern = re.sub(r"\d+\\\.\d+\ s", r"\\d+\\.\\d+ s", pattern)
    return re.fullmatch(pattern, got.rstrip("\n")) is not None


def test_shown_output_comparison():
    assert same_output("phases: graph 0.01 s, prove 12.34 s\n", "phases: graph 0.00 s, prove 0.07 s\n")
    assert not same_output("body 0 Num(value=1) before x\n", "body 0 1 before x\n")
    assert not same_output("a\nb\n", "a\n")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_stay_in_the_repository_and_resolve(page):
    if not page.exists():
        pytest.skip(f"{page.name} does not exist")
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+://", target) or target.startswith("mailto:"):
            continue
        path = target.split("#", 1)[0]
        if not path:
            continue
        resolved = (page.parent / path).resolve()
        assert resolved.is_relative_to(ROOT), f"{page.name} links outside the repository: {target}"
        assert resolved.exists(), f"{page.name} links to a missing file: {target}"


def test_contract_pages_exist_and_say_no_spec():
    for name in ("problem-format.md", "commands.md", "outputs.md", "json.md", "api.md"):
        text = (DOCS / name).read_text()
        assert "SPEC" not in text and "../shared" not in text, name


def test_error_code_table_matches_the_code():
    text = (DOCS / "json.md").read_text()
    rows = dict(re.findall(r"^\| `([a-z_]+)` \| (\d+) \|", text, re.M))
    assert {k: int(v) for k, v in rows.items()} == CODES


def test_every_flag_is_documented():
    """Every flag of every command is in docs/commands.md; search's (a sub-command of its own) in docs/search.md."""
    text = (DOCS / "commands.md").read_text()
    search = (DOCS / "search.md").read_text()
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name, parser in sub.choices.items():
        parsers = [parser]
        if name == "search":
            parsers = [a for a in parser._actions if a.dest == "what"][0].choices.values()
        for p in parsers:
            for action in p._actions:
                for flag in action.option_strings:
                    if flag.startswith("--") and flag != "--help":
                        where, page = (search, "search.md") if name == "search" else (text, "commands.md")
                        assert f"`{flag}" in where, f"synth {name} {flag} is not in docs/{page}"


def test_problem_format_lists_every_key():
    from synth.gemm_doc import GEMM_KEYS
    from synth.load import TOP_KEYS

    text = (DOCS / "problem-format.md").read_text()
    for key in set(TOP_KEYS) | set(GEMM_KEYS) | {"when", "carried", "count", "deps", "min_trip_count",
                                                 "max_stage", "async_stages", "issue", "latency"}:
        assert f"`{key}`" in text, key
    assert "default" in text and "5" in text.split("max_stage` defaults to", 1)[1][:10]


def test_changelog_names_this_version():
    text = (ROOT / "CHANGELOG.md").read_text()
    assert re.search(rf"^## \[?{re.escape(__version__)}\]?", text, re.M)
    import tomllib

    with open(ROOT / "pyproject.toml", "rb") as fh:
        assert tomllib.load(fh)["project"]["version"] == __version__


def test_json_example_names_this_version():
    """docs/json.md's envelope example says which synth wrote it: this one."""
    text = (DOCS / "json.md").read_text()
    shown = re.findall(r'"synth": "([^"]+)"', text)
    assert shown and set(shown) == {__version__}, shown


# References a user of the repository cannot follow: a section of a specification that is not shipped, a
# numbered issue of the project's own tracker, "the issue". An issue or pull request of another project
# is named with its project ("CUTLASS #2641", "triton-lang/triton issue #3551") and is allowed.
INTERNAL_REFS = [
    (re.compile(r"\bSPEC\b(?![\"'])"), "a SPEC section"),  # not a test's '"SPEC" not in ...'
    (re.compile(r"\b[Ii]ssues? \d+"), "an issue number"),
    (re.compile(r"\bthe issue's\b|\bas the issue asks\b"), "'the issue'"),
    (re.compile(r"\(#\d+\)"), "a bare '(#N)' reference"),
    (re.compile(r"\b(?:[Ii]ssue|PR) #\d+"), "an issue or PR number"),
]
PROJECTS = re.compile(r"triton|cutlass|tilelang|fuser|tvm|mlir|llvm|pytorch", re.I)


def internal_references(text: str) -> list[tuple[int, str, str]]:
    """``(line, what, excerpt)`` of every reference in ``text`` that points at nothing a user has."""
    found = []
    for pattern, what in INTERNAL_REFS:
        for m in pattern.finditer(text):
            before = " ".join(text[max(0, m.start() - 40):m.start()].split())
            if "#" in m.group(0) and PROJECTS.search(before):
                continue  # another project's issue or PR, named with its project
            if what == "an issue number" and (re.search(r"latency \d+,$", before)
                                              or re.match(r"\.\d", text[m.end():m.end() + 2])):
                continue  # issue cycles ("latency 200, issue 2") or the verb ("issues 1.9-2.6 instructions")
            line = text.count("\n", 0, m.start()) + 1
            found.append((line, what, text[max(0, m.start() - 20):m.end() + 20].replace("\n", " ")))
    return found


def test_internal_references_are_recognized():
    assert internal_references("the loop of SPEC §1")
    assert not internal_references('assert "SPEC" not in r.stdout')
    assert internal_references("With the emitter of issue 9 the loop")
    assert internal_references("the targets (#11) hold")
    assert internal_references("as the issue asks")
    assert not internal_references("triton-lang/triton\nissue #3551 (A100)")
    assert not internal_references("CUTLASS PR #3654 and Triton #2868; wait #0, group #1, ranked #2")
    assert not internal_references("a producer (latency 200, issue 2); the loop issues 1.9-2.6 instructions")


def test_docs_and_code_have_no_internal_references():
    """docs/, README.md, every text file under synth/ and the tests (but this file, which quotes the patterns)
    read as complete on their own."""
    files = sorted(DOCS.glob("*.md")) + [ROOT / "README.md"]
    files += sorted(p for p in (ROOT / "synth").rglob("*")
                    if p.is_file() and p.suffix in (".py", ".md", ".yaml", ".json", ".h", ".cpp", ".cu", ".txt"))
    files += sorted(p for p in (ROOT / "tests").rglob("*.py") if p.name != "test_docs.py")
    bad = [f"{p.relative_to(ROOT)}:{line}: {what}: ...{excerpt}..."
           for p in files for line, what, excerpt in internal_references(p.read_text(errors="replace"))]
    assert not bad, "\n".join(bad)


def test_the_triton_recipe_of_docs_check_pipelines(tmp_path, monkeypatch):
    """docs/check.md's Triton recipe, run verbatim (it is what tests/check_inputs/generate.py executes for every
    Triton program), gives a pipelined loop that synth check proves: cp.async copies in the scf.for, waits."""
    import sys

    sys.path.insert(0, str(ROOT / "tests"))
    from check_inputs import generate as gen
    from check_inputs.helpers import run_check

    if gen.triton_available():
        pytest.skip(gen.triton_available())
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    recipe = gen.triton_recipe()
    assert gen.TRITON_PROGRAMS["triton-matmul-s3"][1:3] == (recipe.MATMUL_SIGNATURE, recipe.MATMUL_CONSTEXPRS)
    text = recipe.pipelined_ttgir(recipe.matmul, recipe.MATMUL_SIGNATURE, recipe.MATMUL_CONSTEXPRS, num_stages=3)
    loop = text[text.index("scf.for"):]
    assert "ttg.async_copy_global_to_local" in loop and "ttg.async_wait" in loop
    path = tmp_path / "kernel.ttgir"
    path.write_text(text)
    rc, doc, err = run_check(str(path))
    assert rc == 0, err
    assert doc["result"]["counts"]["proven"] >= 2 and doc["result"]["counts"]["refuted"] == 0


def test_the_two_obligation_counts_say_what_they_count(tmp_path):
    """verify.txt and synth certify count different sets (the prover's queries; every obligation the independent
    checker derives): each line says which, and docs/outputs.md explains both."""
    from synth.verify import certify, load_program, verify_program, write_certificate

    rep = verify_program(load_program(str(ROOT / "tests" / "rfc_listings" / "rfc0077-two-stage.json")),
                         tightness=False)
    head = rep.render().splitlines()[0]
    assert re.search(r"\d+/\d+ obligations sent to Z3, the rest settled by the program's structure", head), head
    write_certificate(rep, str(tmp_path / "certificate"), cvc5_check=False)
    res = certify(str(tmp_path / "certificate"))
    line = res.messages[0]
    assert re.search(r"\d+/\d+ obligations of .* re-derived and unsat .*every obligation the checker derives", line), \
        line
    text = " ".join((DOCS / "outputs.md").read_text().split())
    assert "obligations sent to Z3" in text and "every obligation the checker derives" in text


def test_the_gpu_skip_reason_is_the_one_the_readme_names():
    """README: the GPU runner's tests are skipped with the reason "no CUDA GPU"; the skip says exactly that
    first (then why: neither CUDA Python nor pycuda found a device)."""
    said = re.search(r'runner\'s tests\s+are skipped with the reason "([^"]+)"', (ROOT / "README.md").read_text())
    assert said, "README no longer names the GPU tests' skip reason"
    src = (ROOT / "tests" / "test_run.py").read_text()
    reasons = re.findall(r'skipif\(GPU_REASON is not None, reason=f?"([^"{]+)', src)
    assert reasons and all(r.startswith(said.group(1)) for r in reasons), (said.group(1), reasons)


def test_the_api_table_states_each_function_s_keywords_and_defaults():
    """docs/api.md's table gives every synth.api function with its keyword arguments and their defaults as the
    code has them (a keyword added to the code, such as verify's force, must appear there)."""
    import ast
    import inspect

    import synth.api

    rows = re.findall(r"`synth\.api\.(\w+)\((.*?)\)`", (DOCS / "api.md").read_text())
    assert {name for name, _ in rows} >= {"load", "solve", "lower", "verify", "certify", "emit", "run", "search"}
    for name, args in rows:
        call = ast.parse(f"f({args.replace('*, ', '').replace('*,', '')})", mode="eval").body
        shown = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
        params = inspect.signature(getattr(synth.api, name)).parameters.values()
        kw = {p.name: p.default for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}
        positional = [p for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
        shown_positional = len(call.args) + sum(1 for k in shown if k in {p.name for p in positional})
        assert set(shown) - {p.name for p in positional} == set(kw), (name, sorted(shown), sorted(kw))
        for k, v in kw.items():
            assert shown[k] == v, (name, k, shown[k], v)
        assert shown_positional == len(positional), (name, args)


def test_the_flag_table_states_each_command_s_time_limit_and_workers_default():
    """docs/commands.md's `--time-limit` and `--workers` rows give the default of every command that has the flag."""
    text = (DOCS / "commands.md").read_text()
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for flag, dest in (("--time-limit", "time_limit"), ("--workers", "workers")):
        row = re.search(rf"^\| `{flag} [A-Z]+` \| ([^|]+) \|[^|]+\| ([^|]+) \|", text, re.M)
        assert row, flag
        commands, defaults = row.group(1), row.group(2)
        for name, parser in sub.choices.items():
            if name == "search":
                parser = [a for a in parser._actions if a.dest == "what"][0].choices["gemm"]
            action = next((a for a in parser._actions if a.dest == dest), None)
            if action is None:
                continue
            assert re.search(rf"\b{name}\b", commands), (flag, name)
            said = re.search(rf"\b{name} (\d+)", defaults)
            value = float(said.group(1)) if said else float(defaults.strip())
            assert value == float(action.default), (flag, name, value, action.default)


def test_the_readme_names_every_command_and_the_files_solve_writes():
    """README's Commands table has a row per command, and its solve row and Quick start list the files of
    docs/outputs.md's table (which tests/test_cli.py checks against a real solve)."""
    readme = (ROOT / "README.md").read_text()
    table = readme.split("## Commands", 1)[1].split("\n\n", 2)[1]
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name in sub.choices:
        assert re.search(rf"^\| `synth {name}\b", table, re.M), f"README's Commands table has no synth {name} row"
    outputs = (DOCS / "outputs.md").read_text().split("## `schedule.json`", 1)[0]
    files = set()
    for cell in re.findall(r"^\| (`[^|]+`) \|", outputs, re.M):
        files |= set(re.findall(r"`([^`]+)`", cell))
    assert {"problem.yaml", "kernel.cu", ".synth-output.json", "certificate/"} <= files, files
    solve_row = next(line for line in table.splitlines() if line.startswith("| `synth solve"))
    quick = readme.split("## Quick start", 1)[1].split("```", 1)[0]
    for where, text in (("the solve row", solve_row.split("|")[2]), ("Quick start", quick)):
        named = set(re.findall(r"`([^`]+)`", text))
        assert files <= named, f"README's {where} does not name {sorted(files - named)}"
