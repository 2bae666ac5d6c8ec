"""The README's usage example runs and prints what the README says it prints."""
import contextlib
import io
import pathlib
import re
import warnings

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def test_usage_example_output_matches_readme():
    text = README.read_text()
    code = re.search(r"## Usage\n\n```python\n(.*?)```", text, re.S).group(1)
    expected = re.search(r"\nprints\n\n((?:    .*\n)+)", text).group(1)
    expected = [line[4:] for line in expected.splitlines()]
    out = io.StringIO()
    with contextlib.redirect_stdout(out), warnings.catch_warnings():
        warnings.simplefilter("error")  # the example must run without warnings
        exec(compile(code, str(README), "exec"), {})
    assert out.getvalue().splitlines() == expected


def test_newcomer_paths_use_public_names_and_work_from_a_clone():
    # issue 31 items 14-15: 'pip install rbcd[dask]' fails (not on an index); the README
    # sent users to the private rbcd._scale; the CV docstring to rbcd._scale.scale_sigma
    import numpy as np

    import rbcd
    from rbcd import _scale, model_selection

    text = README.read_text()
    assert "'rbcd[" not in text and "pip install '.[dask]'" in text
    assert "rebuild" in text or "builds the extension again" in text
    assert "rbcd._scale" not in text and "rbcd.median_l1_distance(X)" in text
    for doc in (model_selection.__doc__, model_selection.RBClassifierCV.__doc__,
                rbcd.RBClassifier.__doc__, rbcd.RandomBinning.__doc__):
        assert "rbcd._scale" not in doc and "rbcd.binning.median_l1_distance" not in doc
    X = np.random.default_rng(0).random((50, 3))
    assert rbcd.median_l1_distance(X) == _scale.median_l1_distance(X)


def test_dask_example_runs_as_a_script(tmp_path):
    """The README's Dask block, saved as a script and run as one (its local workers are
    processes that import the script: it needs its main guard), fits and predicts."""
    import subprocess
    import sys

    text = README.read_text()
    code = re.search(r"## Scaling out.*?```python\n(.*?)```", text, re.S).group(1)
    assert 'if __name__ == "__main__":' in code
    script = tmp_path / "readme_dask.py"
    script.write_text(code)
    root = README.parent
    env = dict(__import__("os").environ)
    env["PYTHONPATH"] = str(root) + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    values = proc.stdout.strip().strip("[]").split()
    assert len(values) == 5 and all(abs(float(v)) < 10 for v in values), proc.stdout
