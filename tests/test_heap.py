"""afa._heap: large blocks are reused during a batch in a process started with malloc tuning (as Dask's workers
are), and the start-up behaviour comes back afterwards; elsewhere nothing changes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from afa import _heap

ROOT = Path(__file__).resolve().parents[1]

# Minor page faults of 100 allocations of a 2 MiB array, outside, inside and again outside reusable_heap.
PROBE = """
import json, resource
import numpy as np
from afa import _heap

def faults():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(100):
        np.ones(1 << 18).sum()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

outside = faults()
with _heap.reusable_heap() as changed:
    inside = faults()
after = faults()
print(json.dumps({"changed": changed, "outside": outside, "inside": inside, "after": after}))
"""


def probe(**environment) -> dict:
    env = {key: value for key, value in os.environ.items() if not key.startswith("MALLOC_")}
    env.pop("GLIBC_TUNABLES", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    output = subprocess.run([sys.executable, "-c", PROBE], env={**env, **environment}, capture_output=True,
                            text=True, check=True).stdout
    return json.loads(output)


def test_which_start_up_environments_switch_off_the_adaptive_threshold():
    assert not _heap.tuned_at_start({})
    assert not _heap.tuned_at_start({"PATH": "/bin", "GLIBC_TUNABLES": "glibc.rtld.nns=2"})
    for name in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_"):
        assert _heap.tuned_at_start({name: "65536"})
    assert _heap.tuned_at_start({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=65536"})


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc and /proc/self/environ")
def test_a_tuned_process_reuses_large_blocks_only_inside_the_block():
    # 100 arrays of 2 MiB, each mapped and faulted in afresh: 512 pages each.  Reused: a few hundred in all.
    tuned = probe(MALLOC_TRIM_THRESHOLD_="65536")
    assert tuned["changed"] is True
    assert tuned["outside"] > 100 * 400 and tuned["after"] > 100 * 400
    assert tuned["inside"] < tuned["outside"] / 20


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc and /proc/self/environ")
def test_an_untuned_process_is_left_alone():
    plain = probe()
    assert plain["changed"] is False
    assert plain["inside"] < 100 * 400 and plain["after"] < 100 * 400


def test_thresholds_read_from_variables_then_tunables_then_the_default():
    read = _heap._threshold
    assert read({"MALLOC_TRIM_THRESHOLD_": "65536"}, "MALLOC_TRIM_THRESHOLD_", "glibc.malloc.trim_threshold") == 65536
    assert read({"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=0x10000:glibc.rtld.nns=2"},
                "MALLOC_MMAP_THRESHOLD_", "glibc.malloc.mmap_threshold") == 65536
    assert read({}, "MALLOC_MMAP_THRESHOLD_", "glibc.malloc.mmap_threshold") == 128 * 1024
    assert read({"MALLOC_TRIM_THRESHOLD_": str(1 << 40)}, "MALLOC_TRIM_THRESHOLD_", "x") == 2**31 - 1
