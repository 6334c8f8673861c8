"""The worker runtime: claim due executions, run their handlers, report outcomes.

:class:`~fencepost.worker.runtime.Worker` is the claim loop; jobs are
:class:`~fencepost.worker.jobs.JobSpec` values held in a
:class:`~fencepost.worker.registry.JobRegistry`, built from Python functions
(``@app.job``) or from definition files (:mod:`fencepost.worker.definitions`).
"""
