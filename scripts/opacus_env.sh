#!/usr/bin/env bash
# Build a virtual environment with CPU PyTorch and Opacus, install this checkout into it, and run the
# Opacus integration test (tests/test_opacus_integration.py), which trains a small model with a real
# PrivacyEngine whose accountant is afa.interop.opacus.AfaAccountant and prints afa's epsilon beside
# Opacus's PRV and RDP accountants'.
#
#   bash scripts/opacus_env.sh [VENV_DIR]      (default /tmp/afa-opacus-venv; reused if it exists)
#
# torch is pinned to 2.13.0 for the whole run (a constraints file): on the project's machines that
# release is a CPU wheel on disk, while an unpinned or newer torch (asked for directly, or pulled in by
# Opacus's own requirement) would download a CUDA build of several GB.  Override with TORCH_VERSION=...
set -euo pipefail

VENV="${1:-/tmp/afa-opacus-venv}"
TORCH_VERSION="${TORCH_VERSION:-2.13.0}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-python3}"

start=$(date +%s)
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"

constraints="$(mktemp)"
trap 'rm -f "$constraints"' EXIT
echo "torch==$TORCH_VERSION" > "$constraints"

"$PY" -m pip install --quiet -c "$constraints" "torch==$TORCH_VERSION"
"$PY" -m pip install --quiet -c "$constraints" -e "$ROOT[test,opacus]"

# The resolution must not have moved torch.
installed="$("$PY" -c 'import torch; print(torch.__version__)')"
case "$installed" in
    "$TORCH_VERSION"|"$TORCH_VERSION"+*) ;;
    *) echo "torch $installed was installed instead of $TORCH_VERSION" >&2; exit 1 ;;
esac
"$PY" -c 'import opacus, torch, afa; print("opacus", opacus.__version__, "| torch", torch.__version__, "| afa", afa.__file__)'
echo "environment ready in $(( $(date +%s) - start )) s"

cd "$ROOT"
"$PY" -m pytest tests/test_opacus_integration.py -m opacus -v -s -p no:cacheprovider
echo "total $(( $(date +%s) - start )) s"
