//! The records' schema on a real server: the record key the server computes is the runtime's,
//! migration 0002 refuses while claims are in flight and converts completed records, databases
//! migrated by the previous hand-written migrator are adopted by sqlx's, a replay writes
//! nothing, and a record that slips past the in-transaction gate wins on the primary key.

use idemgen_protocol::IdempotencyKey;
use idemgen_runtime::Strategy;
use idemgen_runtime::engine::{Disposition, MIGRATIONS_TABLE as TABLE, Scope, migrator};
use idemgen_testdb::TestDb;
use serde_json::json;
use sqlx::{Executor as _, PgConnection, Row};

use crate::support::*;

/// The SQL of the runtime's migrations, as the files hold it.
const MIGRATION_1: &str = include_str!("../../migrations/0001_idempotency_records.sql");
const MIGRATION_2: &str = include_str!("../../migrations/0002_scope_hash.sql");

async fn connect(db: &TestDb) -> PgConnection {
    db.connect().await.expect("connection")
}

/// The versions sqlx's migrator recorded.
async fn applied(conn: &mut PgConnection) -> Vec<i64> {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT version FROM {TABLE} WHERE success ORDER BY version"
    )))
    .fetch_all(&mut *conn)
    .await
    .expect("reading the migration table")
}

async fn server_hash(conn: &mut PgConnection, scope: &Scope) -> Vec<u8> {
    sqlx::query_scalar("SELECT idemgen_scope_hash($1, $2, $3, $4)")
        .bind(&scope.owner)
        .bind(&scope.operation)
        .bind(&scope.resource_scope)
        .bind(scope.key.as_str())
        .fetch_one(&mut *conn)
        .await
        .expect("idemgen_scope_hash")
}

#[tokio::test]
async fn the_server_computes_the_runtimes_record_keys() {
    let db = TestDb::migrated().await.unwrap();
    let mut conn = connect(&db).await;
    let key = |k: &str| IdempotencyKey::new(k).unwrap();
    let cases = [
        Scope::new("alice", "createWidget", key("k1")),
        // protocol.md's second vector: a two-byte character.
        Scope::new("\u{fc}", "op", key("k")),
        Scope::new("tenant-7", "publishWidget", key("retry-1")).with_resource_scope("w-42"),
        Scope::new("", "", key("x")),
        Scope::new("日本語のオーナー😀", "op", key("a".repeat(255).as_str())),
        // The same bytes split differently are different keys.
        Scope::new("ab", "c", key("k")),
        Scope::new("a", "bc", key("k")),
    ];
    for scope in &cases {
        assert_eq!(
            server_hash(&mut conn, scope).await,
            scope.hash(),
            "{scope:?}"
        );
    }
    assert_eq!(
        hex::encode(cases[0].hash()),
        "86445ffc6fff15e70ba8e25493044f00f7be4442aee5fe90f3a84c42966b1223"
    );
    // Rows the runtime writes carry it as their primary key.
    let pool = db.pool(2).await.unwrap();
    let env = Env {
        exec: idemgen_runtime::Executor::new(
            idemgen_runtime::PgStore::new(pool.clone()),
            config(Strategy::SeparateClaim),
        ),
        business: pg_business(),
        ledger: Ledger::Pg(pool.clone()),
    };
    conn.execute("CREATE TABLE business_writes (id bigserial PRIMARY KEY, label text NOT NULL)")
        .await
        .unwrap();
    let s = Scope::new("日本語のオーナー😀", "createThing", key("k"));
    attempt(&env, request(s.clone(), json!({}), 1), Plan::created("a"))
        .await
        .unwrap();
    let stored: Vec<u8> = sqlx::query_scalar("SELECT scope_hash FROM idempotency_records")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(stored, s.hash());
    assert_eq!(server_hash(&mut conn, &s).await, stored);
}

/// A database at version 1 with one completed and one claimed record.
async fn at_version_1(db: &TestDb) -> (PgConnection, Scope) {
    let mut conn = connect(db).await;
    migrator()
        .run_direct(Some(1), &mut conn, false)
        .await
        .expect("migration 1");
    let done = scope("alice", "done-1");
    sqlx::query(
        "INSERT INTO idempotency_records (owner, operation, idempotency_key, state, fingerprint,
                                          fingerprint_version, claim_token, claimed_at,
                                          response_status, response_headers, response_body)
         VALUES ($1, $2, $3, 'completed', $4, 1, gen_random_uuid(), now(), 201, '[]', 'made a')",
    )
    .bind(&done.owner)
    .bind(&done.operation)
    .bind(done.key.as_str())
    .bind(
        request(done.clone(), json!({"n": 1}), 1)
            .fingerprint
            .as_str(),
    )
    .execute(&mut conn)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO idempotency_records (owner, operation, idempotency_key, state, fingerprint,
                                          fingerprint_version, claim_token, claimed_at)
         VALUES ('bob', 'createThing', 'in-flight', 'claimed', 'f', 1, gen_random_uuid(), now())",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    (conn, done)
}

#[tokio::test]
async fn migration_2_refuses_while_claims_are_in_flight_then_converts_every_record() {
    let db = TestDb::new().await.unwrap();
    let (mut conn, done) = at_version_1(&db).await;
    let refused = idemgen_runtime::migrate(&mut conn)
        .await
        .expect_err("claims are in flight");
    assert!(
        refused
            .to_string()
            .contains("1 claimed record(s) in flight"),
        "{refused}"
    );
    // Nothing changed: still version 1, no key column.
    assert_eq!(applied(&mut conn).await, [1]);
    let column: Option<String> = sqlx::query_scalar(
        "SELECT column_name::text FROM information_schema.columns
          WHERE table_name = 'idempotency_records' AND column_name = 'scope_hash'",
    )
    .fetch_optional(&mut conn)
    .await
    .unwrap();
    assert_eq!(column, None);

    // Once the claim is gone, it applies, and the completed record is found by its new key.
    conn.execute("DELETE FROM idempotency_records WHERE state = 'claimed'")
        .await
        .unwrap();
    idemgen_runtime::migrate(&mut conn).await.expect("migrates");
    assert_eq!(applied(&mut conn).await, [1, 2, 3, 4]);
    let stored: Vec<u8> = sqlx::query_scalar("SELECT scope_hash FROM idempotency_records")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(stored, done.hash());
    // And replayed by both strategies.
    let pool = db.pool(4).await.unwrap();
    conn.execute("CREATE TABLE business_writes (id bigserial PRIMARY KEY, label text NOT NULL)")
        .await
        .unwrap();
    for strategy in [Strategy::SeparateClaim, Strategy::InTransaction] {
        let env = Env {
            exec: idemgen_runtime::Executor::new(
                idemgen_runtime::PgStore::new(pool.clone()),
                config(strategy),
            ),
            business: pg_business(),
            ledger: Ledger::Pg(pool.clone()),
        };
        let replay = attempt(
            &env,
            request(done.clone(), json!({"n": 1}), 1),
            Plan::created("b"),
        )
        .await
        .unwrap_or_else(|e| panic!("{strategy:?}: {e:?}"));
        assert_eq!(replay.disposition, Disposition::Replayed, "{strategy:?}");
        assert_eq!(replay.response.body, "made a");
    }
    // Applying again is a no-op.
    idemgen_runtime::migrate(&mut conn).await.expect("again");
    assert_eq!(applied(&mut conn).await, [1, 2, 3, 4]);
}

#[tokio::test]
async fn databases_migrated_by_the_previous_migrator_are_adopted() {
    let db = TestDb::new().await.unwrap();
    let mut conn = connect(&db).await;
    // What the previous version's `migrate::apply` left behind.
    conn.execute(
        "CREATE TABLE idemgen_schema_migrations (version bigint PRIMARY KEY, name text NOT NULL,
                                                 applied_at timestamptz NOT NULL DEFAULT now())",
    )
    .await
    .unwrap();
    sqlx::raw_sql(MIGRATION_1).execute(&mut conn).await.unwrap();
    conn.execute(
        "INSERT INTO idemgen_schema_migrations (version, name)
         VALUES (1, '0001_idempotency_records')",
    )
    .await
    .unwrap();
    // Migration 1 is not run again (its CREATE TABLE would fail); 2, 3 and 4 are applied.
    idemgen_runtime::migrate(&mut conn).await.expect("adopted");
    assert_eq!(applied(&mut conn).await, [1, 2, 3, 4]);
    let checksum_recorded: bool = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT octet_length(checksum) > 0 FROM {TABLE} WHERE version = 1"
    )))
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert!(checksum_recorded);
}

/// The row version of a record: any write to it (even an update to the same values) changes it.
async fn row_version(pool: &sqlx::PgPool, scope: &Scope) -> (String, String) {
    let row = sqlx::query(
        "SELECT ctid::text AS ctid, xmin::text AS xmin FROM idempotency_records
          WHERE scope_hash = $1",
    )
    .bind(&scope.hash()[..])
    .fetch_one(pool)
    .await
    .expect("the record");
    (row.get("ctid"), row.get("xmin"))
}

#[tokio::test]
async fn a_replay_writes_nothing() {
    for strategy in [Strategy::SeparateClaim, Strategy::InTransaction] {
        replay_writes_nothing(pg_env(config(strategy)).await, strategy).await;
    }
}

#[tokio::test]
async fn a_replay_writes_nothing_on_the_tokio_postgres_store() {
    for strategy in [Strategy::SeparateClaim, Strategy::InTransaction] {
        replay_writes_nothing(tokio_pg_env(config(strategy)).await, strategy).await;
    }
}

async fn replay_writes_nothing<S: idemgen_runtime::Store>(env: Env<S>, strategy: Strategy) {
    let Ledger::Pg(pool) = &env.ledger else {
        unreachable!()
    };
    let s = scope("alice", "replayed");
    let first = attempt(
        &env,
        request(s.clone(), json!({"n": 1}), 1),
        Plan::created("a"),
    )
    .await
    .unwrap();
    assert_eq!(first.disposition, Disposition::Executed);
    let before = row_version(pool, &s).await;
    for _ in 0..10 {
        let again = attempt(
            &env,
            request(s.clone(), json!({"n": 1}), 1),
            Plan::created("b"),
        )
        .await
        .unwrap();
        assert_eq!(again.disposition, Disposition::Replayed, "{strategy:?}");
    }
    assert_eq!(
        row_version(pool, &s).await,
        before,
        "{strategy:?}: the record was written"
    );
    assert_eq!(env.ledger.count("b").await, 0);
}

#[tokio::test]
async fn a_claim_that_slips_past_the_gate_wins_on_the_primary_key() {
    // A separate-claim attempt claims the key while an in-transaction attempt on the same key
    // is inside its handler (the gate does not see claims taken apart): the in-transaction
    // attempt's insert does nothing, it rolls back, and exactly one write commits.
    let separate = pg_env(config(Strategy::SeparateClaim)).await;
    let Ledger::Pg(pool) = &separate.ledger else {
        unreachable!()
    };
    let in_tx = Env {
        exec: idemgen_runtime::Executor::new(
            idemgen_runtime::PgStore::new(pool.clone()),
            config(Strategy::InTransaction),
        ),
        business: pg_business(),
        ledger: Ledger::Pg(pool.clone()),
    };
    let s = scope("alice", "mixed");
    let mut slow = Plan::created("in-tx");
    slow.delay = std::time::Duration::from_millis(300);
    let in_tx_attempt = {
        let in_tx = in_tx.clone();
        let req = request(s.clone(), json!({"n": 1}), 1);
        tokio::spawn(async move { attempt(&in_tx, req, slow).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let claimed = attempt(
        &separate,
        request(s.clone(), json!({"n": 1}), 1),
        Plan::created("separate"),
    )
    .await
    .expect("the separate claim executes");
    assert_eq!(claimed.disposition, Disposition::Executed);
    let lost = in_tx_attempt.await.unwrap();
    match &lost {
        // Answered from the winner's record, or 409 if it was still in flight.
        Ok(outcome) => assert_eq!(outcome.response.body, "made separate"),
        Err(_) => assert_eq!(problem_status(&lost), Some(409), "{lost:?}"),
    }
    assert_eq!(separate.ledger.count("separate").await, 1);
    assert_eq!(
        separate.ledger.count("in-tx").await,
        0,
        "the losing write rolled back"
    );
}

/// The migrator of the previous release, built by hand from a list of (version, description,
/// SQL) rather than by `sqlx::migrate!`: what databases in the field were migrated with.
fn previous_release_migrator() -> sqlx::migrate::Migrator {
    use sqlx::SqlSafeStr;
    use sqlx::migrate::{Migration, MigrationType, Migrator};
    let migrations = [
        (1, "idempotency records", MIGRATION_1),
        (2, "scope hash", MIGRATION_2),
    ]
    .into_iter()
    .map(|(version, description, sql)| {
        Migration::new(
            version,
            description.into(),
            MigrationType::Simple,
            sql.into_sql_str(),
            false,
        )
    })
    .collect();
    let mut migrator = Migrator::with_migrations(migrations);
    migrator.dangerous_set_table_name(TABLE);
    migrator
}

#[tokio::test]
async fn databases_migrated_by_the_previous_release_keep_working() {
    let db = TestDb::new().await.unwrap();
    let mut conn = connect(&db).await;
    previous_release_migrator()
        .run_direct(None, &mut conn, false)
        .await
        .expect("the previous release's migrations");
    let before: Vec<(i64, String, Vec<u8>)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT version, description, checksum FROM {TABLE} ORDER BY version"
    )))
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert_eq!(before.len(), 2);
    // A claim the previous release took and has not finished (its columns: no holder). Migration
    // 3 has no guard to trip on it, unlike migration 2.
    let old_claim = scope("bob", "old-in-flight");
    let old_request = request(old_claim.clone(), json!({"n": 2}), 1);
    let previous_release_claim = "INSERT INTO idempotency_records
            (scope_hash, owner, operation, resource_scope, idempotency_key, state, fingerprint,
             fingerprint_version, claim_token, claimed_at, expires_at)
        SELECT $1, $2, $3, '', $4, 'claimed', $5, 1, gen_random_uuid(), clock_timestamp(), NULL";
    sqlx::query(previous_release_claim)
        .bind(&old_claim.hash()[..])
        .bind(&old_claim.owner)
        .bind(&old_claim.operation)
        .bind(old_claim.key.as_str())
        .bind(old_request.fingerprint.as_str())
        .execute(&mut conn)
        .await
        .unwrap();
    // The embedded migrator agrees on every version, description and checksum: nothing is run
    // again, nothing is refused as modified.
    let embedded = migrator();
    for ((version, description, checksum), migration) in before.iter().zip(embedded.iter()) {
        assert_eq!(*version, migration.version);
        assert_eq!(description, &*migration.description);
        assert_eq!(checksum, &*migration.checksum, "version {version}");
    }
    idemgen_runtime::migrate(&mut conn)
        .await
        .expect("the embedded migrations accept the database");
    let after: Vec<(i64, String, Vec<u8>)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT version, description, checksum FROM {TABLE} ORDER BY version"
    )))
    .fetch_all(&mut conn)
    .await
    .unwrap();
    // The previous release's migrations are untouched; only 0003 (holder leases) and 0004 (the
    // analyze threshold) are new.
    assert_eq!(before[..], after[..2]);
    assert_eq!(after.len(), 4);
    assert_eq!((after[2].0, after[2].1.as_str()), (3, "holder leases"));
    assert_eq!((after[3].0, after[3].1.as_str()), (4, "analyze threshold"));
    // The previous release's claim statement still works on the new schema (a process not yet
    // upgraded, in a rolling deploy): it writes no holder.
    let mixed = scope("carol", "old-process");
    sqlx::query(previous_release_claim)
        .bind(&mixed.hash()[..])
        .bind(&mixed.owner)
        .bind(&mixed.operation)
        .bind(mixed.key.as_str())
        .bind("hs2:00")
        .execute(&mut conn)
        .await
        .expect("the previous release's claim on the new schema");
    let holders: Vec<Option<uuid::Uuid>> =
        sqlx::query_scalar("SELECT holder_id FROM idempotency_records ORDER BY owner")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    assert_eq!(holders, [None, None]);
    // And the store works on it.
    let pool = db.pool(4).await.unwrap();
    conn.execute("CREATE TABLE business_writes (id bigserial PRIMARY KEY, label text NOT NULL)")
        .await
        .unwrap();
    let env = Env {
        exec: idemgen_runtime::Executor::new(
            idemgen_runtime::PgStore::new(pool.clone()),
            config(Strategy::SeparateClaim),
        ),
        business: pg_business(),
        ledger: Ledger::Pg(pool),
    };
    let scope = scope("alice", "after-upgrade");
    let first = attempt(
        &env,
        request(scope.clone(), json!({"n": 1}), 1),
        Plan::created("a"),
    )
    .await;
    assert_eq!(first.unwrap().disposition, Disposition::Executed);
    let replay = attempt(&env, request(scope, json!({"n": 1}), 1), Plan::created("a")).await;
    assert_eq!(replay.unwrap().disposition, Disposition::Replayed);
    // A claim without a holder keeps the stale-claim rule: held (409) although no lease names
    // it, then taken over once older than `stale_claim`.
    let mut cfg = config(Strategy::SeparateClaim);
    cfg.in_flight_wait = std::time::Duration::from_millis(50);
    let held = attempt(
        &Env {
            exec: idemgen_runtime::Executor::new(env.exec.store().clone(), cfg.clone()),
            ..env.clone()
        },
        old_request.clone(),
        Plan::created("old"),
    )
    .await;
    assert_eq!(problem_status(&held), Some(409), "{held:?}");
    cfg.stale_claim = std::time::Duration::from_millis(1);
    let taken = attempt(
        &Env {
            exec: idemgen_runtime::Executor::new(env.exec.store().clone(), cfg),
            ..env.clone()
        },
        old_request,
        Plan::created("old"),
    )
    .await;
    assert_eq!(taken.unwrap().disposition, Disposition::TakenOver);
    assert_eq!(env.ledger.count("old").await, 1);
}

/// Migration 0004: autovacuum leaves a records table of a few pages alone (dead rows from updates
/// included, as every separate-claim completion leaves one), so a lookup by record key keeps its
/// index scan, where a table of the same shape without the settings is vacuumed and analyzed at
/// the next naptime and planned as a sequential scan (the plan sqlx's cached statements then
/// keep while traffic grows the table). Past 1,000 changed rows the records are analyzed as
/// usual, and the plan keeps the index.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autovacuum_leaves_a_few_pages_of_records_alone() {
    use idemgen_testdb::{Cluster, ClusterOptions};
    let cluster = Cluster::start(&ClusterOptions {
        fsync: false,
        max_connections: 20,
        settings: vec![("autovacuum_naptime".into(), "1".into())],
    })
    .expect("dedicated cluster");
    let db = TestDb::on_cluster(&cluster).await.unwrap();
    let mut conn = connect(&db).await;
    idemgen_runtime::migrate(&mut conn).await.unwrap();
    conn.execute("CREATE TABLE shaped_alike (LIKE idempotency_records INCLUDING ALL)")
        .await
        .unwrap();
    let insert = |table: &str, from: i32, to: i32| {
        format!(
            "INSERT INTO {table} (scope_hash, owner, operation, idempotency_key, state,
                 fingerprint, fingerprint_version, claim_token, claimed_at, response_status,
                 response_headers, response_body)
             SELECT sha256(convert_to(i::text, 'UTF8')), 'o', 'op', i::text, 'completed', 'hs2:x',
                    1, gen_random_uuid(), now(), 201, '[]', '\\x00'
               FROM generate_series({from}, {to}) i"
        )
    };
    for table in ["idempotency_records", "shaped_alike"] {
        // A few pages: at this size a vacuumed or analyzed table is planned as a sequential scan.
        conn.execute(sqlx::AssertSqlSafe(insert(table, 1, 120)))
            .await
            .unwrap();
        // 60 dead rows (past autovacuum's default 50), as 60 separate-claim completions leave.
        conn.execute(sqlx::AssertSqlSafe(format!(
            "UPDATE {table} SET response_status = 200 WHERE idempotency_key::int <= 60"
        )))
        .await
        .unwrap();
    }
    let analyzed = |table: &'static str| {
        let db = &db;
        async move {
            let mut conn = db.connect().await.unwrap();
            let at: Option<i64> = sqlx::query_scalar(
                "SELECT autoanalyze_count + autovacuum_count FROM pg_stat_user_tables
                  WHERE relname = $1",
            )
            .bind(table)
            .fetch_optional(&mut conn)
            .await
            .unwrap();
            at.unwrap_or(0) > 0
        }
    };
    let wait_analyzed = |table: &'static str| async move {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !analyzed(table).await {
            assert!(
                std::time::Instant::now() < deadline,
                "autovacuum never analyzed {table}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    };
    let plan = |table: &str| {
        format!(
            "EXPLAIN (FORMAT JSON) SELECT state FROM {table}
              WHERE scope_hash = sha256(convert_to('7', 'UTF8'))"
        )
    };
    async fn node(conn: &mut PgConnection, sql: String) -> String {
        let plan: serde_json::Value = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        plan[0]["Plan"]["Node Type"].as_str().unwrap().to_string()
    }

    wait_analyzed("shaped_alike").await;
    // The control's naptime came and went (and the records table's with it).
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert!(!analyzed("idempotency_records").await);
    let sizes: Vec<f32> = sqlx::query_scalar(
        "SELECT reltuples FROM pg_class
          WHERE relname IN ('idempotency_records', 'shaped_alike') ORDER BY relname",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    assert!(sizes[0] < 0.0 && sizes[1] >= 120.0, "{sizes:?}");
    assert_eq!(node(&mut conn, plan("shaped_alike")).await, "Seq Scan");
    assert_eq!(
        node(&mut conn, plan("idempotency_records")).await,
        "Index Scan"
    );

    conn.execute(sqlx::AssertSqlSafe(insert(
        "idempotency_records",
        201,
        1400,
    )))
    .await
    .unwrap();
    wait_analyzed("idempotency_records").await;
    assert_eq!(
        node(&mut conn, plan("idempotency_records")).await,
        "Index Scan"
    );
}
