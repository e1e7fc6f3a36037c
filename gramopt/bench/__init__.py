"""``gramopt bench``: original vs optimized grammars, per engine, on the same trajectories.

    suites     what is measured (corpus selection, pathological forms, obfuscated corpus)
    engines    drivers for gramopt's runtime, xgrammar and llguidance
    run        interleaved measurement, speedups, content-hash cache, worker processes
    report     report.md and PNG plots
    obfuscate  the seeded obfuscator (language-preserving changes that make a grammar worse)

Imports nothing heavy at package import time; the engines are imported when they run.
"""
