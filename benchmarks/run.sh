#!/usr/bin/env bash
# The benchmark suite in one command: bash benchmarks/run.sh [run_all.py options, e.g. --quick]
#
# Set-up (only when benchmarks/.venv is missing): a virtual environment of its own with afa installed from
# this checkout (pip install -e .) and the peer libraries dp-accounting, prv-accountant and autodp, each
# installed on its own -- a peer that fails to install is simply absent and shows as "not installed" in the
# results.  afa itself never needs them.  Delete benchmarks/.venv to set it up afresh.
# Then benchmarks/run_all.py writes benchmarks/RESULTS.md (about 12 minutes on a 2-core machine).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
venv="$here/.venv"
python="${PYTHON:-python3}"
# Versions the tables were made with; override with e.g. PEERS="dp-accounting prv-accountant autodp".
peers="${PEERS:-dp-accounting==0.4.4 prv-accountant==0.2.0 autodp==0.2.3.1}"

start=$(date +%s)
if [ ! -x "$venv/bin/python" ]; then
    echo "setting up $venv"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$root"
    for peer in $peers; do
        if ! "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$peer"; then
            echo "could not install $peer: the results will show it as not installed" >&2
        fi
    done
    echo "set-up took $(( $(date +%s) - start )) s"
fi

cd "$here"
"$venv/bin/python" run_all.py "$@"
echo "total wall time (set-up included): $(( $(date +%s) - start )) s"
