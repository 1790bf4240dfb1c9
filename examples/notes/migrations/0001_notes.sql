-- The notes service's own table (SQLite), applied at start after the runtime's migrations.
CREATE TABLE IF NOT EXISTS notes (
    id    INTEGER PRIMARY KEY AUTOINCREMENT,
    owner TEXT    NOT NULL,
    text  TEXT    NOT NULL
) STRICT;
