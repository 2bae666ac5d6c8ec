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
