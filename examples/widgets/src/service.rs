//! The hand-written half of the service: the implementation of the generated [`WidgetsApi`].
//! Idempotent operations write through the attempt's transaction handle; the others use the pool.

use idemgen_runtime::store::{PgStore, PgTx};
use idemgen_runtime::{HandlerError, Principal, Problem, ProblemKind, TxHandle};
use sqlx::PgPool;

use crate::api::types::{Problem as ProblemBody, Widget, WidgetColor, WidgetList};
use crate::api::*;
use crate::repo::{self, WidgetRow};

/// The operation whose records a delete tombstones.
const CREATE_OPERATION: &str = "createWidget";

/// The widgets service.
#[derive(Debug, Clone)]
pub struct Widgets {
    pool: PgPool,
}

impl Widgets {
    /// A service on `pool`.
    pub fn new(pool: PgPool) -> Widgets {
        Widgets { pool }
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

fn to_widget(row: WidgetRow) -> Result<Widget, HandlerError> {
    let color = row
        .color
        .map(|c| serde_json::from_value::<WidgetColor>(serde_json::Value::String(c)))
        .transpose()?;
    Ok(Widget {
        id: row.id,
        name: row.name,
        color,
        published: row.published,
        created_at: row.created_at,
    })
}

/// The body of a problem answered by a handler (not by the runtime).
fn problem(kind: ProblemKind, detail: &str) -> ProblemBody {
    ProblemBody {
        r#type: kind.type_uri(),
        title: kind.title().to_owned(),
        status: i64::from(kind.status().as_u16()),
        code: Some(kind.code().to_owned()),
        detail: Some(detail.to_owned()),
    }
}

fn invalid(detail: &str) -> ProblemBody {
    problem(ProblemKind::InvalidRequest, detail)
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
        tx: &mut TxHandle<PgTx>,
        request: CreateWidgetRequest,
    ) -> Result<CreateWidgetResponse, HandlerError> {
        // The router already enforced the spec's 1–100 characters; a name of only spaces
        // passes that but is blank once trimmed.
        let name = request.body.name.trim();
        if name.is_empty() {
            return Ok(CreateWidgetResponse::Status400(invalid(
                "body.name: must not be blank",
            )));
        }
        let color = request.body.color.map(|c| c.to_string());
        let row = repo::insert(tx.conn(), &principal.owner, name, color.as_deref()).await?;
        // Deleting this widget later tombstones this record (a late retry then gets 410).
        tx.set_resource_ref(row.id.to_string());
        let location = format!("/widgets/{}", row.id);
        Ok(CreateWidgetResponse::Status201 {
            body: to_widget(row)?,
            location,
        })
    }

    async fn authorize_list_widgets(
        &self,
        _principal: &Principal,
        _request: &ListWidgetsRequest,
    ) -> Result<(), Problem> {
        Ok(())
    }

    async fn list_widgets(
        &self,
        principal: &Principal,
        request: ListWidgetsRequest,
    ) -> Result<ListWidgetsResponse, HandlerError> {
        // The router already enforced the spec's bounds (1–100).
        let limit = request.limit.unwrap_or(50);
        let mut conn = self.pool.acquire().await?;
        let rows = repo::list(&mut conn, &principal.owner, i64::from(limit)).await?;
        let items = rows.into_iter().map(to_widget).collect::<Result<_, _>>()?;
        Ok(ListWidgetsResponse::Status200(WidgetList { items }))
    }

    async fn authorize_get_widget(
        &self,
        _principal: &Principal,
        _request: &GetWidgetRequest,
    ) -> Result<(), Problem> {
        Ok(())
    }

    async fn get_widget(
        &self,
        principal: &Principal,
        request: GetWidgetRequest,
    ) -> Result<GetWidgetResponse, HandlerError> {
        let mut conn = self.pool.acquire().await?;
        Ok(
            match repo::get(&mut conn, &principal.owner, request.id).await? {
                Some(row) => GetWidgetResponse::Status200(to_widget(row)?),
                None => {
                    GetWidgetResponse::Status404(problem(ProblemKind::NotFound, "no such widget"))
                }
            },
        )
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
        request: DeleteWidgetRequest,
    ) -> Result<DeleteWidgetResponse, HandlerError> {
        let mut tx = self.pool.begin().await?;
        if !repo::delete(&mut tx, &principal.owner, request.id).await? {
            return Ok(DeleteWidgetResponse::Status404(problem(
                ProblemKind::NotFound,
                "no such widget",
            )));
        }
        // In the same transaction: the create that made this widget now answers 410.
        PgStore::tombstone_resource_on(
            &mut tx,
            &principal.owner,
            CREATE_OPERATION,
            &request.id.to_string(),
        )
        .await
        .map_err(|e| HandlerError::msg(e.to_string()))?;
        tx.commit().await?;
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
        tx: &mut TxHandle<PgTx>,
        request: PublishWidgetRequest,
    ) -> Result<PublishWidgetResponse, HandlerError> {
        // The router already enforced the spec's 1–50 characters; blank once trimmed is ours.
        let channel = request.body.channel.trim();
        if channel.is_empty() {
            return Ok(PublishWidgetResponse::Status400(invalid(
                "body.channel: must not be blank",
            )));
        }
        // The state change and its outbox event commit with the idempotency record.
        match repo::publish(tx.conn(), &principal.owner, request.id, channel).await? {
            Some(row) => Ok(PublishWidgetResponse::Status200(to_widget(row)?)),
            None => Ok(PublishWidgetResponse::Status404(problem(
                ProblemKind::NotFound,
                "no such widget",
            ))),
        }
    }
}
