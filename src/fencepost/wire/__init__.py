"""The JSON shapes of the HTTP API, shared by the service (:mod:`fencepost.api`) and the client.

One pydantic model per body, one mapping to and from the domain types
(:mod:`fencepost.wire.mapping`):

* :mod:`~fencepost.wire.fields`: the field types and their rules (names, text,
  integers, payloads, instants, durations);
* :mod:`~fencepost.wire.executions`: submits, executions, attempts, transitions,
  commands;
* :mod:`~fencepost.wire.work`: the worker protocol (claims, leases, reports);
* :mod:`~fencepost.wire.schedules`: schedules;
* :mod:`~fencepost.wire.reports`: nodes, buckets, stats and the SLO report.

The service answers with ``Model.from_domain(obj)``; the client reads an answer with
``Model.model_validate_json(text).to_domain()`` and sends ``Request.body(arguments)``.
Nothing here is imported by a worker that talks to its database directly: pydantic
loads only in the service and in the client.
"""
