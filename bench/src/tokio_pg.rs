//! The same comparison on tokio-postgres: `TokioPgStore` against floors written on the same
//! driver (deadpool-postgres's pool, statements prepared once per connection), each scenario
//! named as on sqlx with `_tokio_postgres` after it. The floors are what a handler on this
//! driver writes without idemgen: `BEGIN`, the inserts and `COMMIT`, each awaited.
//!
//! A third floor, `plain_plus_record_tokio_postgres`, is the in-transaction create's writes
//! without its gate or executor: the store's own `BEGIN`, the business insert, and the completed
//! record sent with `COMMIT` (`TokioPgStore::begin`, `insert_completed`, `commit`), three round
//! trips as the create makes. Its ratio to `plain_plus_row` is what the record row costs beyond
//! any row. `gated_record_tokio_postgres` adds the gate (`begin_gated` in place of `begin`), still
//! without the executor, so the in-transaction create's cost over the plain create splits into
//! the record row, the gate and the executor, each measured in the same run.

use std::sync::Arc;

use anyhow::Context;
use idemgen_runtime::deadpool_postgres::Pool;
use idemgen_runtime::engine::{
    ClaimRequest, ClaimToken, ExecuteError, HandlerFuture, ResponseCodec, StoredResponse,
};
use idemgen_runtime::{Executor, ExecutorConfig, Store, Strategy, TokioPgStore, TxHandle};

use crate::{Bench, Created, Op, Pools, ScenarioResult, request};

const INSERT_THING: &str = "INSERT INTO things (id, owner, name) VALUES ($1, $2, 'bench')";

impl Bench {
    fn tokio_pool(&self, size: usize) -> anyhow::Result<Pool> {
        // From the measured options (through the delay proxy with `--db-delay-ms`): a
        // tokio-postgres configuration adds hosts and ports rather than replacing them.
        let mut config = idemgen_runtime::tokio_postgres::Config::new();
        config
            .host(self.options.get_host())
            .port(self.options.get_port())
            .user(self.options.get_username())
            .ssl_mode(idemgen_runtime::tokio_postgres::config::SslMode::Disable);
        if let Some(database) = self.options.get_database() {
            config.dbname(database);
        }
        TokioPgStore::pool_with(config, size).map_err(|e| anyhow::anyhow!("{e}"))
    }

    /// The plain create on tokio-postgres: `BEGIN`, the insert, `COMMIT`.
    pub(crate) async fn plain_tokio(
        &self,
        clients: usize,
        plus_row: bool,
    ) -> anyhow::Result<ScenarioResult> {
        let pool = self.tokio_pool(clients)?;
        let p = pool.clone();
        let run = uuid::Uuid::new_v4().simple().to_string();
        let op: Op = Arc::new(move |c, n| {
            let (p, key) = (p.clone(), format!("{run}-{n}"));
            Box::pin(async move {
                let owner = format!("owner-{c}");
                let mut client = p.get().await?;
                let tx = client.transaction().await?;
                let insert = tx.prepare_cached(INSERT_THING).await?;
                tx.execute(&insert, &[&uuid::Uuid::new_v4(), &owner])
                    .await?;
                if plus_row {
                    let key_row = tx
                        .prepare_cached("INSERT INTO plain_keys (owner, key) VALUES ($1, $2)")
                        .await?;
                    tx.execute(&key_row, &[&owner, &key]).await?;
                }
                tx.commit().await?;
                Ok(())
            })
        });
        let name = if plus_row {
            "plain_plus_row_tokio_postgres"
        } else {
            "plain_create_tokio_postgres"
        };
        self.measure(name, clients, Pools::Tokio(&pool), op).await
    }

    /// The in-transaction create's writes through the store, without the executor, and without
    /// the gate unless `gated`.
    pub(crate) async fn plus_record_tokio(
        &self,
        clients: usize,
        gated: bool,
    ) -> anyhow::Result<ScenarioResult> {
        let pool = self.tokio_pool(clients)?;
        let store = Arc::new(TokioPgStore::new(pool.clone()));
        let run = uuid::Uuid::new_v4().simple().to_string();
        let op: Op = Arc::new(move |c, n| {
            let (store, key) = (store.clone(), format!("{run}-{n}"));
            Box::pin(async move {
                let owner = format!("owner-{c}");
                let request = request(&owner, &key);
                let claim = ClaimRequest {
                    scope: &request.scope,
                    fingerprint: &request.fingerprint,
                    fingerprint_version: request.fingerprint_version,
                    token: ClaimToken::generate(),
                    holder: None,
                    stale_after: ExecutorConfig::default().stale_claim,
                    retention: ExecutorConfig::default().retention,
                };
                let mut tx = if gated {
                    match store.begin_gated(&claim).await? {
                        idemgen_runtime::engine::Gate::Open(tx) => tx,
                        _ => anyhow::bail!("a fresh key's gate did not open"),
                    }
                } else {
                    store.begin().await?
                };
                let id = uuid::Uuid::new_v4();
                let client = tx.client();
                let insert = client.prepare_cached(INSERT_THING).await?;
                client.execute(&insert, &[&id, &owner]).await?;
                // What the executor stores for this response.
                let encoded = Created(id)
                    .encode_success()?
                    .context("a created thing has a response")?;
                let response =
                    StoredResponse::new(encoded.status, &encoded.headers, encoded.body, &[])?;
                let resource = id.to_string();
                let inserted = store
                    .insert_completed(&mut tx, &claim, &response, Some(&resource))
                    .await?;
                anyhow::ensure!(inserted, "a fresh key's record was not inserted");
                store
                    .commit(tx)
                    .await
                    .map_err(|e| anyhow::anyhow!("{e:?}"))?;
                Ok(())
            })
        });
        self.measure(
            if gated {
                "gated_record_tokio_postgres"
            } else {
                "plain_plus_record_tokio_postgres"
            },
            clients,
            Pools::Tokio(&pool),
            op,
        )
        .await
    }

    pub(crate) async fn idempotent_tokio(
        &self,
        name: &str,
        clients: usize,
        strategy: Strategy,
        begin_at_claim: bool,
    ) -> anyhow::Result<ScenarioResult> {
        let pool = self.tokio_pool(clients)?;
        let exec = Executor::new(
            TokioPgStore::new(pool.clone()).with_begin_at_claim(begin_at_claim),
            ExecutorConfig {
                strategy,
                ..ExecutorConfig::default()
            },
        );
        let run = uuid::Uuid::new_v4().simple().to_string();
        let op: Op = Arc::new(move |c, n| {
            let (exec, key) = (exec.clone(), format!("{run}-{n}"));
            Box::pin(async move {
                let replayed = create(&exec, &format!("owner-{c}"), &key).await?;
                anyhow::ensure!(!replayed, "a fresh key replayed");
                Ok(())
            })
        });
        self.measure(name, clients, Pools::Tokio(&pool), op).await
    }

    pub(crate) async fn replay_tokio(&self, clients: usize) -> anyhow::Result<ScenarioResult> {
        let pool = self.tokio_pool(clients)?;
        let exec = Executor::new(TokioPgStore::new(pool.clone()), ExecutorConfig::default());
        let run = uuid::Uuid::new_v4().simple().to_string();
        const KEYS: u64 = 500;
        for k in 0..KEYS {
            create(&exec, "replayer", &format!("{run}-{k}")).await?;
        }
        let op: Op = Arc::new(move |_, n| {
            let (exec, key) = (exec.clone(), format!("{run}-{}", n % KEYS));
            Box::pin(async move {
                let replayed = create(&exec, "replayer", &key).await?;
                anyhow::ensure!(replayed, "a completed key executed again");
                Ok(())
            })
        });
        self.measure("replay_tokio_postgres", clients, Pools::Tokio(&pool), op)
            .await
    }
}

async fn create(exec: &Executor<TokioPgStore>, owner: &str, key: &str) -> anyhow::Result<bool> {
    let owner_in = owner.to_owned();
    let result = exec
        .execute(
            request(owner, key),
            move |tx: &mut TxHandle<TokioPgStore>| -> HandlerFuture<'_, Created, anyhow::Error> {
                Box::pin(async move {
                    let id = uuid::Uuid::new_v4();
                    let client = tx.conn().await?;
                    let insert = client.prepare_cached(INSERT_THING).await?;
                    client.execute(&insert, &[&id, &owner_in]).await?;
                    tx.set_resource_ref(id.to_string());
                    Ok(Created(id))
                })
            },
        )
        .await;
    match result {
        Ok(o) => Ok(o.replayed()),
        Err(ExecuteError::Problem(p)) => anyhow::bail!("problem: {p}"),
        Err(ExecuteError::Handler(e)) => anyhow::bail!("handler: {e}"),
    }
}
