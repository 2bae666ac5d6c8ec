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
