"""The contract pages in docs/: their examples run, their links stay in the repository, their tables match the code."""

from __future__ import annotations

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
    for n, code in enumerate(blocks):
        try:
            exec(compile(code, f"docs/api.md block {n + 1}", "exec"), {"__name__": "__docs__"})
        except Exception as exc:  # name the block that broke
            raise AssertionError(f"docs/api.md python block {n + 1} failed: {exc!r}") from exc
    assert (tmp_path / "out" / "two-stage" / "program.json").exists()


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
    text = (DOCS / "commands.md").read_text()
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name, parser in sub.choices.items():
        if name in ("search", "check"):  # documented on their own pages
            continue
        for action in parser._actions:
            for flag in action.option_strings:
                if flag.startswith("--") and flag != "--help":
                    assert f"`{flag}" in text, f"synth {name} {flag} is not in docs/commands.md"


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
