import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

# Every test runs under the harness: nothing it starts or makes outlives it.
pytest_plugins = ["harness"]
