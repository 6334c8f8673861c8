-- fencepost PostgreSQL schema, version 6: the job catalogue, and the jobs each node serves.

-- One row per published job version, immutable once written: the digest of its
-- definition (sha256 of the canonical JSON), the definition itself (name, version,
-- schemas, defaults, description, source) and when it was first published. The
-- definition is text, not jsonb: jsonb rewrites numbers (1e20, -0.0), and the text
-- read back must be the one the digest hashes.
CREATE TABLE job_catalogue (
    name          TEXT        NOT NULL COLLATE "C",
    version       INTEGER     NOT NULL,
    digest        TEXT        NOT NULL,
    definition    TEXT        NOT NULL,
    published_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (name, version)
);

-- The (job, version) pairs a node serves, as a JSON array of [name, version] pairs.
ALTER TABLE nodes ADD COLUMN jobs JSONB NOT NULL DEFAULT '[]';
