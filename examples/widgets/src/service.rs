//! The hand-written half of the service: the implementation of the generated [`WidgetsApi`],
//! once for both drivers ([`Database`]). Writes go through the transaction the runtime hands
//! them; reads use the pool (each in a transaction of its own behind a transaction pooler).

use idemgen_runtime::{
    HandlerError, HandlerResult, Pooler, Principal, Problem, ProblemKind, TxHandle,
};
use sqlx::PgPool;

use crate::api::types::{self, Widget, WidgetColor, WidgetList};
use crate::api::*;
use crate::repo::{Database, Published, Sqlx, TokioPostgres, WidgetRow};

/// The problem type of publishing a widget on a second channel (a business 409).
pub const ALREADY_PUBLISHED: &str = "https://widgets.example/problems/already-published";

/// The widgets service on the driver `D`: [`Sqlx`] (the store `PgStore`) by default, or
/// [`TokioPostgres`] (`TokioPgStore`, whose completion shares `COMMIT`'s round trip).
#[derive(Debug, Clone)]
pub struct Widgets<D = Sqlx> {
    db: D,
}

impl Widgets<Sqlx> {
    /// A service on `pool`, connected to PostgreSQL directly.
    pub fn new(pool: PgPool) -> Widgets<Sqlx> {
        Widgets {
            db: Sqlx::new(pool),
        }
    }

    /// The service behind `pooler` (the store's [`Pooler`]; see [`Sqlx::with_pooler`]).
    pub fn with_pooler(self, pooler: Pooler) -> Widgets<Sqlx> {
        Widgets {
            db: self.db.with_pooler(pooler),
        }
    }
}

impl Widgets<TokioPostgres> {
    /// A service whose reads run on `pool` and whose writes run in `TokioPgStore`'s
    /// transactions.
    pub fn on_tokio_postgres(pool: idemgen_runtime::deadpool_postgres::Pool) -> Self {
        Widgets {
            db: TokioPostgres::new(pool),
        }
    }

    /// The service behind `pooler` (see [`TokioPostgres::with_pooler`]).
    pub fn with_tokio_pooler(self, pooler: Pooler) -> Self {
        Widgets {
            db: self.db.with_pooler(pooler),
        }
    }
}

impl<D> Widgets<D> {
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

impl<D: Database> WidgetsApi for Widgets<D> {
    type Store = D::Store;

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
        tx: &mut TxHandle<D::Store>,
        request: CreateWidgetRequest,
    ) -> HandlerResult<CreateWidget> {
        // The router already enforced the spec's 1–100 characters; a name of only spaces
        // passes that but is blank once trimmed.
        let name = request.body.name.trim();
        if name.is_empty() {
            return Err(blank("body.name").into());
        }
        let color = request.body.color.map(|c| c.as_str());
        let row = self
            .db
            .insert(tx, &principal.owner, name, color)
            .await
            .map_err(HandlerError::internal)?;
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
        let rows = self
            .db
            .list(&principal.owner, i64::from(request.limit))
            .await
            .map_err(HandlerError::internal)?;
        let items = rows.into_iter().map(to_widget).collect::<Result<_, _>>()?;
        Ok(ListWidgetsResponse::Status200(WidgetList { items }))
    }

    async fn get_widget(
        &self,
        principal: &Principal,
        request: GetWidgetRequest,
    ) -> HandlerResult<GetWidget> {
        let row = self
            .db
            .get(&principal.owner, request.id)
            .await
            .map_err(HandlerError::internal)?;
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
        tx: &mut TxHandle<D::Store>,
        request: DeleteWidgetRequest,
    ) -> HandlerResult<DeleteWidget> {
        let deleted = self
            .db
            .delete(tx, &principal.owner, request.id)
            .await
            .map_err(HandlerError::internal)?;
        if !deleted {
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
        tx: &mut TxHandle<D::Store>,
        request: PublishWidgetRequest,
    ) -> HandlerResult<PublishWidget> {
        // The router already enforced the spec's 1–50 characters and its pattern (lower case,
        // digits, dashes), so a channel is never blank.
        let channel = request.body.channel.as_str();
        // The state change and its outbox event commit with the idempotency record.
        let published = self
            .db
            .publish(tx, &principal.owner, request.id, channel)
            .await
            .map_err(HandlerError::internal)?;
        match published {
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
