-- fencepost SQLite schema, version 6: the job catalogue, and the jobs each node serves.

-- One row per published job version, immutable once written: the digest of its
-- definition (sha256 of the canonical JSON), the definition itself (canonical JSON
-- text: name, version, schemas, defaults, description, source) and when it was
-- first published.
CREATE TABLE job_catalogue (
    name          TEXT    NOT NULL,
    version       INTEGER NOT NULL,
    digest        TEXT    NOT NULL,
    definition    TEXT    NOT NULL,
    published_at  INTEGER NOT NULL,
    PRIMARY KEY (name, version)
) WITHOUT ROWID;

-- The (job, version) pairs a node serves, as a JSON array of [name, version] pairs.
ALTER TABLE nodes ADD COLUMN jobs TEXT NOT NULL DEFAULT '[]';
