import pathlib
import re
import subprocess
import sys

README = pathlib.Path(__file__).parents[1] / "README.md"


def test_readme_example_runs():
    (code,) = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    # A fresh process: the example's kernel name is global to the process.
    check = (
        "\nassert scale.defaults == {'cpu': 'jax', 'gpu': 'jax', 'tpu': 'jax'}"
        "\nassert (f(x) == 2 * x).all()"
    )
    result = subprocess.run(
        [sys.executable, "-c", code + check], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
