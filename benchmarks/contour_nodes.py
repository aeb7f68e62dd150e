"""How many nodes of the subsampled Gaussian's numeric MGF one eps(delta) on the contour evaluates.

The contour method's cost for DP-SGD is nearly all in evaluating the subsampled MGF at the trapezoid's nodes
(issue 22, point 6), so the node count and the number of evaluation calls are a measure of its work that,
unlike a time, does not depend on this shared machine's load.  Each case is one Poisson-subsampled Gaussian
composed k times, eps(delta) with ``method="contour"`` on a fresh accountant; with ``--before PATH`` the same
cases run on another checkout too (each tree in its own subprocess), and the table shows both.

    PYTHONPATH=. python benchmarks/contour_nodes.py [--before PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CASES = [(1.0, 0.01, 100, 1e-5), (1.0, 0.01, 300, 1e-5), (1.0, 0.01, 50, 1e-5), (1.0, 0.01, 1000, 1e-5),
         (1.0, 0.01, 100, 1e-10), (1.0, 0.01, 200, 1e-8), (0.8, 0.01, 100, 1e-6), (1.5, 0.05, 30, 1e-6),
         (1.0, 0.01, 10, 1e-5), (2.0, 0.001, 1000, 1e-6)]

CHILD = r"""
import json, sys
root = {root!r}
if root:
    sys.path.insert(0, root)
import afa
import afa.engines.contour as contour
counts = [0, 0]
evaluate = contour.batched_log_phi

def counted(s, terms):
    counts[0] += s.size
    counts[1] += 1
    return evaluate(s, terms)

contour.batched_log_phi = counted
rows = []
for sigma, q, k, delta in {cases!r}:
    counts[:] = [0, 0]
    accountant = afa.Accountant()
    accountant.compose(afa.Gaussian(sigma).poisson_subsampled(q), times=k)
    try:
        result = accountant.epsilon_result(delta, method="contour")
        answer = [result.value, result.lower, result.upper]
    except afa.AccuracyError as error:
        answer = type(error).__name__
    rows.append([counts[0], counts[1], answer])
print(json.dumps([afa.__file__, rows]))
"""


def run(root: str) -> tuple[str, list]:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    source = CHILD.format(root=os.path.abspath(root) if root else "", cases=CASES)
    out = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def cell(nodes: int, calls: int) -> str:
    return f"{nodes} in {calls}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="another afa checkout to count on the same cases")
    args = parser.parse_args()
    after_file, after = run("")
    before = run(args.before)[1] if args.before else None
    print(f"afa: {after_file}" + (f"; before: {args.before}" if args.before else ""))
    head = "| σ | q | k | δ | " + ("MGF nodes in calls, before | " if before else "") + "MGF nodes in calls | ε (contour) |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for index, (sigma, q, k, delta) in enumerate(CASES):
        nodes, calls, answer = after[index]
        shown = f"{answer[0]:.12g}" if isinstance(answer, list) else f"refused ({answer})"
        old = f"{cell(*before[index][:2])} | " if before else ""
        print(f"| {sigma:g} | {q:g} | {k} | {delta:g} | {old}{cell(nodes, calls)} | {shown} |")


if __name__ == "__main__":
    main()
