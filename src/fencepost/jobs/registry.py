"""The jobs a process knows: every (name, version) it can submit or run."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from fencepost.domain.errors import ValidationError
from fencepost.jobs.spec import JobSpec


class JobRegistry:
    """Job specs by name and version; each ``(name, version)`` is registered once."""

    def __init__(self, specs: Iterable[JobSpec] = ()) -> None:
        self._specs: dict[str, dict[int, JobSpec]] = {}
        for spec in specs:
            self.add(spec)

    def add(self, spec: JobSpec) -> None:
        """Register ``spec``; a second spec for the same name and version is an error."""
        versions = self._specs.setdefault(spec.name, {})
        if spec.version in versions:
            raise ValidationError(
                "version",
                f"job {spec.name!r} version {spec.version} is defined twice: "
                f"in {versions[spec.version].source or '?'} and in {spec.source or '?'}",
            )
        versions[spec.version] = spec

    def get(self, name: str, version: int | None = None) -> JobSpec:
        """The spec of ``name`` at ``version`` (the latest when None).

        Raises :class:`ValidationError` naming ``job`` or ``version`` when unknown.
        """
        versions = self._specs.get(name)
        if not versions:
            known = ", ".join(sorted(self._specs)) or "none"
            raise ValidationError("job", f"unknown job {name!r} (known: {known})")
        if version is None:
            return versions[max(versions)]
        spec = versions.get(version)
        if spec is None:
            known = ", ".join(str(v) for v in sorted(versions))
            raise ValidationError(
                "version", f"job {name!r} has no version {version} (known: {known})"
            )
        return spec

    def restricted(self, names: Iterable[str]) -> JobRegistry:
        """A registry holding only the jobs called ``names`` (each must be known)."""
        wanted = list(names)
        for name in wanted:
            self.get(name)
        return JobRegistry(s for s in self if s.name in wanted)

    def __iter__(self) -> Iterator[JobSpec]:
        for name in sorted(self._specs):
            versions = self._specs[name]
            for version in sorted(versions):
                yield versions[version]

    def __len__(self) -> int:
        return sum(len(v) for v in self._specs.values())
