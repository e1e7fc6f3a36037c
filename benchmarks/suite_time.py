"""Where the test suite's time goes: per-test wall and CPU seconds, by file and by test.

As a pytest plugin it appends, as each phase of a test ends (setup, call, teardown), one line
to ``$SUITE_TIME_OUT.<pid>.tsv`` (default prefix ``/tmp/suite-time``): node id, phase, wall
seconds, CPU seconds of the test process and its finished children (``getrusage`` SELF +
CHILDREN: spawned batch workers and CLI subprocesses count). Lines are written as tests end,
so a run cut short still says where its time went; CPU seconds barely move with the load of a
shared machine, wall seconds do.

    PYTHONPATH=benchmarks SUITE_TIME_OUT=/tmp/st python -m pytest -q -n 2 -p suite_time
    python benchmarks/suite_time.py /tmp/st [N]     # totals, top N files and tests by CPU
"""

from __future__ import annotations

import collections
import glob
import os
import resource
import sys
import time

import pytest

OUT = os.environ.get("SUITE_TIME_OUT", "/tmp/suite-time")


def _cpu() -> float:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def _timed(phase: str):
    @pytest.hookimpl(hookwrapper=True)
    def hook(item):
        wall, cpu = time.perf_counter(), _cpu()
        yield
        with open(f"{OUT}.{os.getpid()}.tsv", "a", encoding="utf-8") as f:
            f.write(f"{item.nodeid}\t{phase}\t{time.perf_counter() - wall:.3f}\t{_cpu() - cpu:.3f}\n")
    return hook


pytest_runtest_setup = _timed("setup")
pytest_runtest_call = _timed("call")
pytest_runtest_teardown = _timed("teardown")


def read(prefix: str) -> dict[str, list[float]]:
    """node id -> [wall s, CPU s] summed over its phases, from every ``prefix.*.tsv``."""
    tests: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0])
    for path in glob.glob(prefix + ".*.tsv"):
        with open(path, encoding="utf-8") as f:
            for line in f:
                node, _phase, wall, cpu = line.rstrip("\n").split("\t")
                tests[node][0] += float(wall)
                tests[node][1] += float(cpu)
    return tests


def main(argv: list[str]) -> None:
    prefix, top = argv[0], int(argv[1]) if len(argv) > 1 else 15
    tests = read(prefix)
    files: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0])
    for node, (wall, cpu) in tests.items():
        f = files[node.split("::")[0]]
        f[0] += wall
        f[1] += cpu
        f[2] += 1
    print(f"{len(tests)} tests: CPU {sum(c for _, c in tests.values()):.0f} s, "
          f"wall summed over workers {sum(w for w, _ in tests.values()):.0f} s")
    print("\n| file | tests | CPU s | wall s |\n|---|---:|---:|---:|")
    for name, (wall, cpu, n) in sorted(files.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"| {name} | {n} | {cpu:.1f} | {wall:.0f} |")
    print("\n| test | CPU s | wall s |\n|---|---:|---:|")
    for node, (wall, cpu) in sorted(tests.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"| {node} | {cpu:.1f} | {wall:.0f} |")


if __name__ == "__main__":
    main(sys.argv[1:])
