"""The verifier's own mistakes are caught: tools/mutations.py applies each deliberate mistake
to a copy of the repository and runs the CPU tests named for it (see its docstring); here
CI runs that list, and the check is shown able to say NOT CAUGHT."""
import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tools" / "mutations.py"


def _script():
    if "tools_mutations" not in sys.modules:  # a dataclass's module must be registered
        spec = importlib.util.spec_from_file_location("tools_mutations", SCRIPT)
        sys.modules[spec.name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[spec.name])
    return sys.modules["tools_mutations"]


def test_each_mistake_patches_the_code_once_and_names_tests_that_exist():
    mutations = _script().MUTATIONS
    assert len(mutations) >= 7
    for m in mutations:
        assert (ROOT / m.path).read_text().count(m.old) == 1, m.mistake
        assert m.cpu, f"{m.mistake}: no CPU test named"
        assert all("/test_gpu_" not in t for t in m.cpu), m.cpu
        assert all("/test_gpu_" in t for t in m.gpu), m.gpu
        assert all((ROOT / t.split("::")[0]).is_file() for t in m.cpu + m.gpu), m.mistake


def test_a_change_no_named_test_sees_is_reported_not_caught():
    script = _script()
    harmless = script.Mutation(
        "a comment reworded", "cudnn_rnn/check/verify.py",
        "# any other pairing (FP8, integers): a sanity bound only",
        "# any other pairing: a sanity bound",
        cpu=("tests/test_verify.py::test_a_non_finite_output_never_passes",))
    rows = script.check([harmless], log=lambda *a, **k: None)
    assert rows[0]["caught"] == [] and "NOT CAUGHT" in script.table(rows)
    assert (ROOT / harmless.path).read_text().count(harmless.old) == 1  # the tree untouched


def test_every_deliberate_mistake_is_caught_by_a_cpu_test():
    proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True,
                          cwd=ROOT, timeout=1200)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    rows = [x for x in proc.stdout.splitlines() if x.startswith("| ") and "mistake" not in x]
    assert len(rows) == len(_script().MUTATIONS), proc.stdout
    assert not [r for r in rows if "NOT CAUGHT" in r or "GPU-only" in r], proc.stdout
    print("\n" + proc.stdout)
