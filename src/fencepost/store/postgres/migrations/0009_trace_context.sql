-- fencepost PostgreSQL schema, version 9: the submitter's trace context.
--
-- With tracing on (fencepost.tracing: the otel extra and a tracer provider), a
-- submit stores the W3C trace context it ran in (a JSON object of traceparent and
-- tracestate) and each claim returns it to the worker, whose attempt span
-- continues the submitter's trace. NULL when tracing is off (a bit in the row's
-- null bitmap); no index holds it. Adding a nullable column without a default
-- rewrites nothing.
ALTER TABLE executions ADD COLUMN IF NOT EXISTS trace_context text;
