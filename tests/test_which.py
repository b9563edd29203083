"""tests/which.py, the map from a module of synth to its tests: every module has tests, the map follows the
imports (a module's own tests come first), and a name that is not a module is refused."""

import subprocess
import sys

import which  # tests/ is on the path (tests/conftest.py's folder)


def test_every_module_of_synth_has_tests():
    assert [m for m in sorted(which.modules()) if not which.tests_of(m)] == []


def test_a_module_s_own_tests_come_first_and_importers_follow():
    found = dict(which.tests_of("synth.hopper.kernel_design"))
    assert found["tests/hopper/test_emit_identity.py"] == 0  # imports it
    # synth.frontends.verdict is imported by no test: its tests are those of the modules that import it
    verdict = which.tests_of("synth.frontends.verdict")
    assert verdict and all(h >= 1 for _, h in verdict)
    assert "tests/test_check_tilelang.py" in dict(verdict)


def test_the_command_line():
    r = subprocess.run([sys.executable, "tests/which.py", "-k", "synth/hopper/kernel_design.py"],
                       capture_output=True, text=True, cwd=which.ROOT)
    assert r.returncode == 0 and r.stdout.startswith("python -m pytest ") and "test_emit_identity.py" in r.stdout
    r = subprocess.run([sys.executable, "tests/which.py", "synth/nosuch.py"], capture_output=True, text=True,
                       cwd=which.ROOT)
    assert r.returncode == 2 and "not a module of synth/" in r.stderr and "Traceback" not in r.stderr
