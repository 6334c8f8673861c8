-- fencepost SQLite schema, version 9: the submitter's trace context.
--
-- With tracing on (fencepost.tracing: the otel extra and a tracer provider), a
-- submit stores the W3C trace context it ran in (a JSON object of traceparent and
-- tracestate) and each claim hands it to the worker, whose attempt span continues
-- the submitter's trace. NULL when tracing is off: the common row pays one header
-- byte, and no index holds it.
ALTER TABLE executions ADD COLUMN trace_context TEXT;
