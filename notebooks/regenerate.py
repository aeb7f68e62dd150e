"""Re-execute the research notebooks at full parameters, store their outputs in place and write the
figures of the documentation (docs/reproducing.md) to ``docs/figures/``.

    python notebooks/regenerate.py                 # every notebook
    python notebooks/regenerate.py afa_paper       # just these (names without .ipynb)

Needs the notebook extra: ``pip install -e '.[notebooks]'``. The test suite executes the same
notebooks with reduced parameters (``AFA_NOTEBOOK_QUICK=1``, tests/test_notebooks.py).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import nbclient
import nbformat

HERE = Path(__file__).resolve().parent
FIGURES = HERE.parent / "docs" / "figures"
CELL_TIMEOUT_SECONDS = 3600


def regenerate(path: Path) -> float:
    """Execute ``path`` at full parameters in place; return the seconds it took."""
    notebook = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    nbclient.NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_SECONDS,
        kernel_name="python3",
        resources={"metadata": {"path": str(HERE)}},
    ).execute()
    nbformat.write(notebook, path)
    return time.perf_counter() - start


def main(names: list[str]) -> None:
    FIGURES.mkdir(parents=True, exist_ok=True)
    os.environ.pop("AFA_NOTEBOOK_QUICK", None)
    os.environ["AFA_NOTEBOOK_FIGURES"] = str(FIGURES)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")]))
    paths = [HERE / f"{name}.ipynb" for name in names] if names else sorted(HERE.glob("*.ipynb"))
    for path in paths:
        print(f"{path.name}: {regenerate(path):.0f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
