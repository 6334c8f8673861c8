"""The service's settings that the command line names before the service is loaded.

``fencepost --help`` and ``fencepost worker`` must not import FastAPI, so the
defaults ``fencepost serve`` shows in its help live here, apart from the code
that applies them (:mod:`fencepost.api.guard`, :mod:`fencepost.api.protocol`,
:mod:`fencepost.api.auth`).
"""

from __future__ import annotations

#: The environment variable holding tokens: ``token=scope,scope;token=scope``.
TOKENS_ENV = "FENCEPOST_TOKENS"

#: Default time for a request's headers, from connecting or from the previous response.
DEFAULT_HEADER_TIMEOUT = 10.0

#: Default time to receive a whole body once the headers are in: 1 MiB at 100 KiB/s.
DEFAULT_BODY_TIMEOUT = 10.0

#: Default bytes of bodies buffered at once across all requests: 64 bodies of 1 MiB.
DEFAULT_BODY_BUDGET = 64 * 1_048_576

#: Default longest long-poll of ``GET /executions/{id}?wait=``, in seconds: under the
#: 60 s idle timeout of common proxies; a client waits longer in several polls.
DEFAULT_MAX_WAIT = 30.0
