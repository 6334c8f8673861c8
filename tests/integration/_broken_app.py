"""An app module whose own import fails: it needs a package that is not installed."""

import nonexistent_dep  # type: ignore[import-not-found]  # noqa: F401

import fencepost

app = fencepost.App("memory://")
