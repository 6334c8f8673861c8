"""The store contract, part four: the job catalogue, and the rules every submit takes from it.

Workers publish the jobs they run (:meth:`CatalogueVerbs.publish_jobs`); every verb
that creates work (``submit``, ``submit_or_find``, ``submit_many``, ``add_schedule``,
``update_schedule``) then resolves its job through :meth:`CatalogueVerbs._catalogued`,
written once here for every backend.

Reading the catalogue on every submit would cost a query each; entries are immutable
once published, so this process keeps them (see :class:`CatalogueVerbs` for how long
a view may be stale).
"""

from __future__ import annotations

import threading
import time
from abc import abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fencepost.domain import payloads
from fencepost.domain.catalogue import (
    Catalogue,
    InputValidator,
    JobEntry,
    check_entry,
    check_inputs,
    input_validator,
)
from fencepost.domain.checks import require_name
from fencepost.domain.errors import CatalogueConflict, NotFound, ValidationError
from fencepost.domain.retry import RetryPolicy
from fencepost.domain.submission import DEFAULT_MAX_ATTEMPTS, UNSET_FIELDS
from fencepost.store.core import StoreCore

if TYPE_CHECKING:
    pass

#: How long this process trusts its view of the catalogue's names and latest versions,
#: in seconds, before reading them again (see :class:`CatalogueVerbs`).
CATALOGUE_REFRESH = 1.0

#: The most entries one :meth:`CatalogueVerbs.publish_jobs` call takes.
MAX_PUBLISH = 1000


def with_store_defaults(arguments: dict[str, Any], *, unpublished: bool = False) -> dict[str, Any]:
    """``arguments`` (changed in place) with the store's defaults where they are None:
    3 attempts and priority 0. (The queue's, ``default``, is filled in later.)

    ``unpublished``: the job is not in the catalogue (yet), so what the caller left
    out is also recorded as ``unset_defaults``, for the job's published defaults to
    fill in when a worker publishes it (see :meth:`CatalogueVerbs.adopt_unpublished`).
    """
    if unpublished:
        unset = [name for name in UNSET_FIELDS if arguments.get(name) is None]
        arguments["unset_defaults"] = ",".join(unset) if unset else None
    if arguments.get("max_attempts") is None:
        arguments["max_attempts"] = DEFAULT_MAX_ATTEMPTS
    if arguments.get("priority") is None:
        arguments["priority"] = 0
    return arguments


class CatalogueVerbs(StoreCore):
    """Verbs of :class:`~fencepost.store.base.Store` for the job catalogue.

    **Staleness.** A store keeps the catalogue it last read. A published entry never
    changes, so a ``(job, version)`` once seen is used as it is forever; which
    jobs and versions exist (hence the latest version) is read again when the view
    is older than :data:`CATALOGUE_REFRESH` (1 s), at once after a publish through
    this store, and on a miss (an unknown job or version is looked up again, once
    per request or batch, before it is refused or stored as unpublished). So for up
    to one second after another process publishes, this store may still pin the
    previous latest version, and, while it last saw an empty catalogue (when no
    lookup is made at all), store a submit of the new job as unpublished: the next
    registration of a worker serving the job (within one heartbeat) gives it the
    job's defaults (:meth:`adopt_unpublished`).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._catalogue = Catalogue()
        self._catalogue_read_at = float("-inf")  # monotonic seconds; never read yet
        self._catalogue_lock = threading.Lock()
        #: Input validators by entry digest (a digest names one schema forever).
        self._validators: dict[str, InputValidator] = {}

    # -- the verbs -------------------------------------------------------------------------

    def publish_jobs(self, entries: Iterable[JobEntry]) -> list[JobEntry]:
        """Add job versions to the catalogue, in one transaction; return them as stored.

        Each entry is checked (:func:`fencepost.domain.catalogue.check_entry`: names,
        schemas as storable JSON, its digest the definition's), else
        :class:`ValidationError` naming the field (``[2].input_schema``). An entry
        whose ``(name, version)`` is stored with the same digest is left as it is
        (its stored ``published_at`` is returned); a different digest raises
        :class:`CatalogueConflict` naming the job, the version and both digests. Either
        way of failing, nothing of the batch is written. New entries get
        ``published_at = now``. The same ``(name, version)`` twice in one call must
        carry one digest.
        """
        if isinstance(entries, JobEntry):
            raise ValidationError("entries", "must be a collection of JobEntry, not one entry")
        checked: dict[tuple[str, int], JobEntry] = {}
        for index, entry in enumerate(entries):
            if index >= MAX_PUBLISH:
                raise ValidationError("entries", f"at most {MAX_PUBLISH} entries in one call")
            try:
                valid = check_entry(entry)
            except ValidationError as exc:
                raise ValidationError(f"[{index}].{exc.field}", exc.message) from None
            twin = checked.get(valid.key)
            if twin is not None and twin.digest != valid.digest:
                raise CatalogueConflict(valid.name, valid.version, twin.digest, valid.digest)
            checked[valid.key] = valid
        if not checked:
            return []
        stored = self._publish(list(checked.values()))
        self._refresh_catalogue()
        self.adopt_unpublished({e.name for e in checked.values()})
        by_key = {e.key: e for e in stored}
        return [by_key[e.key] for e in checked.values()]

    def adopt_unpublished(self, names: Iterable[str] | None = None) -> int:
        """Give work submitted before its job was published the job's published defaults.

        An execution (or schedule) whose job the catalogue did not hold when it was
        submitted was stored with the store's defaults, and with the list of what its
        submitter left out. For each of ``names`` (None: every job) now in the
        catalogue, its latest version's defaults fill in those fields — attempts
        (never fewer than the attempt already made), timeout, priority and queue; a
        schedule's attempts, priority and queue — on every unfinished execution and
        every schedule of it, and the list is cleared (finished executions keep what
        they ran with). What the submitter set is kept. Inputs are checked by the
        worker at the first claim (the execution is not pinned to a version).

        Called by :meth:`publish_jobs` and by every worker registration
        (:meth:`register_node` with ``jobs``), so work submitted by a process that had
        not yet seen a publication is adopted within a heartbeat. Returns how many
        executions and schedules took defaults; cheap when none wait (one read
        through a partial index).
        """
        waiting = self._unpublished_jobs()
        if names is not None:
            waiting &= set(names)
        if not waiting:
            return 0
        catalogue = self._refresh_catalogue()
        adopted = 0
        for name in sorted(waiting):
            entry = catalogue.latest.get(name)
            if entry is not None:
                adopted += self._adopt_defaults(entry)
        return adopted

    def entry_for(self, job: str, version: int | None = None) -> JobEntry | None:
        """The catalogue entry a submit of ``job`` at ``version`` would run, or None.

        The latest version when ``version`` is None; None when the job is not
        published (and ``unknown_jobs`` allows it). Refusals are a submit's: a
        :class:`ValidationError` on ``job`` (``unknown_jobs="refuse"``) or on
        ``version`` (a version not published).
        """
        return self._entry_of(job, version, None)

    def jobs(self) -> list[JobEntry]:
        """Every entry of the catalogue (every version of every job), by name then version."""
        return sorted(self._read_catalogue(), key=lambda e: e.key)

    def job(self, name: str) -> list[JobEntry]:
        """Every published version of the job ``name``, oldest first.

        :class:`NotFound` (``subject="job"``) when no version of it was published.
        """
        name = require_name(name, "name", max_len=1024)
        found = [e for e in self.jobs() if e.name == name]
        if not found:
            raise NotFound(name, subject="job")
        return found

    # -- backend hooks -----------------------------------------------------------------------

    @abstractmethod
    def _publish(self, entries: Sequence[JobEntry]) -> list[JobEntry]:
        """Store checked entries (distinct keys) in one transaction; return them as stored.

        Insert each one whose ``(name, version)`` is absent, with ``published_at = now``;
        for one present, compare digests: equal, return the stored entry; different,
        raise :class:`CatalogueConflict` (``stored_digest`` first) and write nothing.
        """

    @abstractmethod
    def _read_catalogue(self) -> list[JobEntry]:
        """Every stored entry."""

    def _catalogue_keys(self) -> set[tuple[str, int]]:
        """The stored ``(name, version)`` pairs: what a refresh reads first."""
        return {e.key for e in self._read_catalogue()}

    @abstractmethod
    def _unpublished_jobs(self) -> set[str]:
        """The jobs of the executions and schedules whose ``unset_defaults`` is set."""

    @abstractmethod
    def _adopt_defaults(self, entry: JobEntry) -> int:
        """In one transaction, fill in ``entry``'s defaults where ``unset_defaults``
        lists them, on the unfinished executions and the schedules of ``entry.name``,
        and clear the list on every execution and schedule of it; return how many
        unfinished executions and schedules changed (see :meth:`adopt_unpublished`)."""

    @abstractmethod
    def _mark_schedule_unset(self, schedule_id: str, unset: str) -> None:
        """Record what an unpinned schedule's adder left out (``unset_defaults``)."""

    def _note_unpublished_schedule(self, schedule: Any, given: Mapping[str, Any]) -> None:
        """After ``add_schedule``: record what its caller left out (``given`` holds its
        ``max_attempts``, ``priority`` and ``queue`` as passed) when its job was not
        in the catalogue, for :meth:`adopt_unpublished`."""
        if schedule.job_version is not None or not isinstance(schedule.job, str):
            return  # pinned: the catalogue's defaults were applied when it was added
        if self._current_catalogue().latest.get(schedule.job) is not None:
            return
        unset = [name for name in ("max_attempts", "priority", "queue") if given.get(name) is None]
        if unset:
            self._mark_schedule_unset(schedule.id, ",".join(unset))

    # -- what submits use --------------------------------------------------------------------

    def _current_catalogue(self) -> Catalogue:
        """This process's view of the catalogue, read again when older than the refresh."""
        if time.monotonic() - self._catalogue_read_at >= CATALOGUE_REFRESH:
            self._refresh_catalogue()
        return self._catalogue

    def _refresh_catalogue(self) -> Catalogue:
        """Read which entries exist; fetch the entries only when new ones appeared."""
        with self._catalogue_lock:
            keys = self._catalogue_keys()
            if keys != set(self._catalogue.entries):
                self._catalogue = Catalogue(self._read_catalogue())
            self._catalogue_read_at = time.monotonic()
            return self._catalogue

    def _catalogued(
        self,
        job: object,
        arguments: Mapping[str, Any],
        *,
        schedule: bool = False,
        since: float | None = None,
    ) -> dict[str, Any]:
        """``arguments`` of a submit (or a new schedule, ``schedule=True``) of ``job``,
        after the catalogue's rules.

        A job in the catalogue: ``version`` pinned (the latest when None; an unknown
        one is a :class:`ValidationError` on ``version``), ``inputs`` checked against
        that version's schema (naming ``inputs.<field>``), and ``max_attempts``,
        ``timeout`` (not for schedules), ``priority`` and ``queue`` filled in from the
        job's defaults where the caller left None. A job no one published: refused
        (naming ``job``) when the store's ``unknown_jobs`` is ``refuse``, else stored
        with what the caller left out listed as ``unset_defaults`` (for
        :meth:`adopt_unpublished`; not for a schedule, see
        :meth:`_note_unpublished_schedule`). Whatever is still
        None gets the store's default (3 attempts, priority 0, no timeout, the
        ``default`` queue: a None queue is checked as ``default`` later).
        """
        out = dict(arguments)
        applies = self._catalogue_applies()
        entry = self._entry_of(job, out.get("version"), since) if applies else None
        if entry is None:
            return with_store_defaults(out, unpublished=not schedule and isinstance(job, str))
        out["version"] = entry.version
        out["inputs"], text = self._checked_inputs(entry, out.get("inputs"))
        if not schedule:  # encoded once: prepare() stores this text as it is
            out["inputs_json"] = text
        defaults = entry.defaults
        if out.get("max_attempts") is None:
            out["max_attempts"] = defaults.max_attempts
        if out.get("priority") is None:
            out["priority"] = defaults.priority
        if out.get("queue") is None:
            out["queue"] = defaults.queue
        if not schedule and out.get("timeout") is None:
            out["timeout"] = defaults.timeout
        return with_store_defaults(out)

    def _catalogue_applies(self) -> bool:
        """Whether a submit's job is looked up in the catalogue at all: not while the
        catalogue is empty and unknown jobs are allowed (the fast path, asked once
        per batch by :meth:`Store.submit_many`)."""
        return bool(self._current_catalogue()) or self.config.unknown_jobs == "refuse"

    def _entry_of(self, job: object, version: object, since: float | None) -> JobEntry | None:
        """The entry a request for ``job`` at ``version`` runs (see :meth:`_catalogued`).

        A job or version this process's view does not hold is looked up again before
        it is refused or stored as unpublished, unless the view was read after
        ``since`` (monotonic seconds: when the request, or the batch, began; None:
        now), so a batch of unknown jobs reads the catalogue once, not per item.
        Arguments the catalogue cannot look up (a job that is not a string, a version
        that is not a positive integer) pass through: the submit's own checks refuse
        them, naming the field.
        """
        if not isinstance(job, str):
            return None
        if version is not None and (
            not isinstance(version, int) or isinstance(version, bool) or version < 1
        ):
            return None
        policy = self.config.unknown_jobs
        catalogue = self._current_catalogue()
        try:
            found = catalogue.lookup(job, version, policy)
        except ValidationError:
            found = None
        if found is not None:
            return found
        # Refusing, or storing as unpublished, on a view up to a second old would miss
        # what another process has just published: look again first.
        if since is None:
            since = time.monotonic()
        if self._catalogue_read_at < since:
            catalogue = self._refresh_catalogue()
        return catalogue.lookup(job, version, policy)

    def _checked_inputs(self, entry: JobEntry, inputs: object) -> tuple[dict[str, Any], str]:
        """``inputs`` as they will be stored, and their JSON text, if ``entry``'s schema
        accepts them."""
        # Checked as stored (JSON: {1: "a"} is {"1": "a"}), what the handler receives.
        text = payloads.encode(
            {} if inputs is None else inputs, field="inputs", limit=self.config.max_payload_bytes
        )
        validator = self._validators.get(entry.digest)
        if validator is None:
            validator = self._validators[entry.digest] = input_validator(entry.input_schema)
        return check_inputs(validator, payloads.decode(text)), text

    def _job_retry(self, job: str, version: int | None) -> RetryPolicy:
        """The backoff of an execution of ``job`` pinned to ``version``: the job's, if the
        catalogue this process holds has one for it, else the store's. Never reads the
        store (it runs inside fenced transactions): call :meth:`_current_catalogue` first.
        """
        # An unpinned execution was submitted before its job was published: the job's
        # latest version is what it runs and what its retries follow.
        entry = (
            self._catalogue.latest.get(job)
            if version is None
            else self._catalogue.entries.get((job, version))
        )
        if entry is not None:
            policy = entry.defaults.retry_policy()
            if policy is not None:
                return policy
        return self.config.retry
