"""Side-by-side benchmarks, run as ``hpc bench NAME --json``.

Each benchmark module has ``add_arguments(parser)`` and ``run(args) -> dict``; the dict is the
JSON contract: ``bench``, ``backend``, ``ranks``, ``size``, ``ours``, ``peers``, ``ratio``
(peer seconds / our seconds, so above 1 means we are faster) and, where one applies, ``limits``.
"""
