"""The job catalogue: what a process can submit or run, and with which defaults.

- :mod:`~fencepost.jobs.spec`: :class:`~fencepost.jobs.spec.JobSpec`, one version of one
  job, built from a Python function (:func:`~fencepost.jobs.spec.spec_from_function`);
- :mod:`~fencepost.jobs.registry`: :class:`~fencepost.jobs.registry.JobRegistry`, the
  specs a process knows by name and version;
- :mod:`~fencepost.jobs.catalogue`: a spec as the store's job catalogue holds it (what
  every submitter's defaults and input checks come from);
- :mod:`~fencepost.jobs.context`: :class:`~fencepost.jobs.context.Context`, what a
  handler sees of its execution;
- :mod:`~fencepost.jobs.definitions` and :mod:`~fencepost.jobs.runners`: jobs written as
  definition files (commands, HTTP requests, Python functions).

Nothing is imported here: a worker process loads only the spec, registry and context
modules; definition files (YAML, jsonschema, httpx) load only with ``--definitions``, and
input schemas (pydantic, jsonschema) only when a submit checks inputs.
"""
