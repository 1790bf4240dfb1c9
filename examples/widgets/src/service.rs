//! The hand-written half of the service: the implementation of the generated [`WidgetsApi`].
//! Writes go through the transaction the runtime hands them; reads use the pool (each in a
//! transaction of its own behind a transaction pooler).

use idemgen_runtime::{HandlerResult, PgStore, Pooler, Principal, Problem, ProblemKind, TxHandle};
use sqlx::PgPool;

use crate::api::types::{self, Widget, WidgetColor, WidgetList};
use crate::api::*;
use crate::repo::{self, Published, WidgetRow};

/// The problem type of publishing a widget on a second channel (a business 409).
pub const ALREADY_PUBLISHED: &str = "https://widgets.example/problems/already-published";

/// The widgets service.
#[derive(Debug, Clone)]
pub struct Widgets {
    pool: PgPool,
    pooler: Pooler,
}

/// A read's transaction behind a transaction pooler: one server connection for all of its
/// messages, and no statement name left there by another client (as the runtime's own `BEGIN`).
const READ_BEGIN: &str = "BEGIN; DEALLOCATE ALL";

impl Widgets {
    /// A service on `pool`, connected to PostgreSQL directly.
    pub fn new(pool: PgPool) -> Widgets {
        Widgets {
            pool,
            pooler: Pooler::Direct,
        }
    }

    /// The service behind `pooler` (the store's [`Pooler`]): behind a transaction pooler each
    /// read runs in a transaction of its own, because sqlx sends a statement with parameters as
    /// two round trips that such a pooler may hand to two server connections.
    pub fn with_pooler(mut self, pooler: Pooler) -> Widgets {
        self.pooler = pooler;
        self
    }

    /// Read-only credentials may read but never write, replays included.
    fn may_write(&self, principal: &Principal) -> Result<(), Problem> {
        if principal.has_role(crate::auth::READ_ONLY) {
            return Err(
                Problem::new(ProblemKind::Forbidden).with_detail("this account is read-only")
            );
        }
        Ok(())
    }
}

fn to_widget(row: WidgetRow) -> Result<Widget, Problem> {
    let color = row
        .color
        .map(|c| c.parse::<WidgetColor>())
        .transpose()
        .map_err(|e| Problem::new(ProblemKind::Internal).with_internal(e.to_string()))?;
    Ok(Widget {
        id: row.id,
        name: row.name,
        color,
        published: row.published,
        created_at: row.created_at,
    })
}

fn not_found() -> Problem {
    Problem::new(ProblemKind::NotFound).with_detail("no such widget")
}

/// A value the spec allows but the service does not (blank once trimmed).
fn blank(field: &str) -> Problem {
    Problem::new(ProblemKind::InvalidRequest).with_detail(format!("{field}: must not be blank"))
}

impl WidgetsApi for Widgets {
    type Store = PgStore;

    async fn authorize_create_widget(
        &self,
        principal: &Principal,
        _request: &CreateWidgetRequest,
    ) -> Result<(), Problem> {
        self.may_write(principal)
    }

    async fn create_widget(
        &self,
        principal: &Principal,
        tx: &mut TxHandle<PgStore>,
        request: CreateWidgetRequest,
    ) -> HandlerResult<CreateWidget> {
        // The router already enforced the spec's 1–100 characters; a name of only spaces
        // passes that but is blank once trimmed.
        let name = request.body.name.trim();
        if name.is_empty() {
            return Err(blank("body.name").into());
        }
        let color = request.body.color.map(|c| c.as_str());
        let row = repo::insert(tx.conn().await?, &principal.owner, name, color).await?;
        // Deleting this widget later tombstones this record (a late retry then gets 410).
        tx.set_resource_ref(row.id.to_string());
        let location = format!("/widgets/{}", row.id);
        Ok(CreateWidgetResponse::Status201 {
            body: to_widget(row)?,
            location,
        })
    }

    async fn list_widgets(
        &self,
        principal: &Principal,
        request: ListWidgetsRequest,
    ) -> HandlerResult<ListWidgets> {
        // The router already applied the spec's default (50) and enforced its bounds (1–100).
        let (owner, limit) = (&principal.owner, i64::from(request.limit));
        let rows = if self.pooler == Pooler::Transaction {
            let mut tx = self.pool.begin_with(READ_BEGIN).await?;
            let rows = repo::list(&mut tx, owner, limit).await?;
            tx.commit().await?;
            rows
        } else {
            repo::list(&mut *self.pool.acquire().await?, owner, limit).await?
        };
        let items = rows.into_iter().map(to_widget).collect::<Result<_, _>>()?;
        Ok(ListWidgetsResponse::Status200(WidgetList { items }))
    }

    async fn get_widget(
        &self,
        principal: &Principal,
        request: GetWidgetRequest,
    ) -> HandlerResult<GetWidget> {
        let row = if self.pooler == Pooler::Transaction {
            let mut tx = self.pool.begin_with(READ_BEGIN).await?;
            let row = repo::get(&mut tx, &principal.owner, request.id).await?;
            tx.commit().await?;
            row
        } else {
            repo::get(
                &mut *self.pool.acquire().await?,
                &principal.owner,
                request.id,
            )
            .await?
        };
        match row {
            Some(row) => Ok(GetWidgetResponse::Status200(to_widget(row)?)),
            None => Err(not_found().into()),
        }
    }

    async fn authorize_delete_widget(
        &self,
        principal: &Principal,
        _request: &DeleteWidgetRequest,
    ) -> Result<(), Problem> {
        self.may_write(principal)
    }

    async fn delete_widget(
        &self,
        principal: &Principal,
        tx: &mut TxHandle<PgStore>,
        request: DeleteWidgetRequest,
    ) -> HandlerResult<DeleteWidget> {
        if !repo::delete(tx.conn().await?, &principal.owner, request.id).await? {
            return Err(not_found().into());
        }
        // On success the pipeline tombstones, in this transaction, the records of `createWidget`
        // and `publishWidget` about this widget (`x-idempotency-tombstones`): their late retries
        // answer 410.
        Ok(DeleteWidgetResponse::Status204)
    }

    async fn authorize_publish_widget(
        &self,
        principal: &Principal,
        _request: &PublishWidgetRequest,
    ) -> Result<(), Problem> {
        self.may_write(principal)
    }

    async fn publish_widget(
        &self,
        principal: &Principal,
        tx: &mut TxHandle<PgStore>,
        request: PublishWidgetRequest,
    ) -> HandlerResult<PublishWidget> {
        // The router already enforced the spec's 1–50 characters and its pattern (lower case,
        // digits, dashes), so a channel is never blank.
        let channel = request.body.channel.as_str();
        // The state change and its outbox event commit with the idempotency record.
        match repo::publish(tx.conn().await?, &principal.owner, request.id, channel).await? {
            Published::Now(row) => Ok(PublishWidgetResponse::Status200(to_widget(row)?)),
            // A business conflict, declared as the operation's 409 with the service's own problem
            // type: clients do not retry it (they retry only the protocol's in-flight 409).
            Published::Elsewhere(on) => Err(PublishWidgetError::Status409(types::Problem {
                r#type: ALREADY_PUBLISHED.to_owned(),
                title: "The widget is already published on another channel".to_owned(),
                status: 409,
                code: Some("already_published".to_owned()),
                detail: Some(format!("published on `{on}`; a widget has one channel")),
            })
            .into()),
            Published::NotFound => Err(not_found().into()),
        }
    }
}
