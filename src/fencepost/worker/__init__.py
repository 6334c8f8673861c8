"""The worker runtime: claim due executions, run their handlers, report outcomes.

:class:`~fencepost.worker.runtime.Worker` is the claim loop; jobs are
:class:`~fencepost.jobs.spec.JobSpec` values held in a
:class:`~fencepost.jobs.registry.JobRegistry`, built from Python functions
(``@app.job``) or from definition files (:mod:`fencepost.jobs.definitions`); the
catalogue is :mod:`fencepost.jobs`, shared with the HTTP API.
"""
