//! The handlers on their own, without HTTP: each test gets a fresh database on a real PostgreSQL
//! from the runtime's `testing` feature, and calls a handler of `WidgetsApi` inside a transaction
//! it commits or drops, as a team would test its own implementation.

use std::sync::Arc;

use idemgen_runtime::testing::TestDb;
use idemgen_runtime::{HandlerError, PgStore, Principal, ProblemKind, TokioPgStore, TxHandle};
use widgets::api::types::NewWidget;
use widgets::api::*;
use widgets::service::Widgets;

async fn setup() -> (Widgets, Arc<PgStore>, sqlx::PgPool) {
    let db = TestDb::migrated().await.expect("a test database");
    let pool = db.pool(4).await.expect("a pool");
    widgets::migrate(&pool).await.expect("migrations");
    let store = Arc::new(PgStore::new(pool.clone()));
    (Widgets::new(pool.clone()), store, pool)
}

async fn rows(pool: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM widgets")
        .fetch_one(pool)
        .await
        .unwrap()
}

fn new_widget(name: &str) -> CreateWidgetRequest {
    CreateWidgetRequest {
        body: NewWidget {
            name: name.into(),
            color: None,
        },
    }
}

#[tokio::test]
async fn create_writes_through_the_transaction_it_is_given() {
    let (service, store, pool) = setup().await;
    let alice = Principal::new("alice");
    let mut tx = TxHandle::begin(Arc::clone(&store)).await.unwrap();
    let created = service
        .create_widget(&alice, &mut tx, new_widget("  Sprocket "))
        .await
        .expect("created");
    let CreateWidgetResponse::Status201 { body, location } = created;
    assert_eq!(body.name, "Sprocket", "trimmed");
    assert_eq!(location, format!("/widgets/{}", body.id));
    assert_eq!(tx.resource_ref(), Some(body.id.to_string().as_str()));
    // Not committed yet: invisible to other connections; dropping the handle rolls back.
    assert_eq!(rows(&pool).await, 0);
    drop(tx);
    assert_eq!(rows(&pool).await, 0);

    let mut tx = TxHandle::begin(Arc::clone(&store)).await.unwrap();
    service
        .create_widget(&alice, &mut tx, new_widget("Gear"))
        .await
        .expect("created");
    tx.commit().await.unwrap();
    assert_eq!(rows(&pool).await, 1);
}

#[tokio::test]
async fn a_blank_name_is_a_400_problem_and_writes_nothing() {
    let (service, store, pool) = setup().await;
    let mut tx = TxHandle::begin(store).await.unwrap();
    let refused = service
        .create_widget(&Principal::new("alice"), &mut tx, new_widget("   "))
        .await;
    let Err(HandlerError::Problem(problem)) = refused else {
        panic!("expected a problem, got {refused:?}");
    };
    assert_eq!(problem.kind(), ProblemKind::InvalidRequest);
    assert_eq!(problem.detail(), Some("body.name: must not be blank"));
    tx.commit().await.unwrap();
    assert_eq!(rows(&pool).await, 0);
}

#[tokio::test]
async fn delete_removes_only_the_owners_widget() {
    let (service, store, pool) = setup().await;
    let alice = Principal::new("alice");
    let mut tx = TxHandle::begin(Arc::clone(&store)).await.unwrap();
    let CreateWidgetResponse::Status201 { body, .. } = service
        .create_widget(&alice, &mut tx, new_widget("Gear"))
        .await
        .unwrap();
    tx.commit().await.unwrap();

    let mut tx = TxHandle::begin(Arc::clone(&store)).await.unwrap();
    let bobs = service
        .delete_widget(
            &Principal::new("bob"),
            &mut tx,
            DeleteWidgetRequest { id: body.id },
        )
        .await;
    assert!(
        matches!(&bobs, Err(HandlerError::Problem(p)) if p.kind() == ProblemKind::NotFound),
        "{bobs:?}"
    );
    drop(tx);
    let mut tx = TxHandle::begin(store).await.unwrap();
    service
        .delete_widget(&alice, &mut tx, DeleteWidgetRequest { id: body.id })
        .await
        .expect("deleted");
    tx.commit().await.unwrap();
    assert_eq!(rows(&pool).await, 0);
}

/// The same handler on the pipelining store: it writes through the client of the transaction it
/// is given, a dropped transaction leaves nothing, and reads see only what committed.
#[tokio::test]
async fn on_tokio_postgres_create_writes_through_its_transaction_and_reads_see_the_commit() {
    let db = TestDb::migrated().await.expect("a test database");
    let pool = db.pool(2).await.expect("a pool");
    widgets::migrate(&pool).await.expect("migrations");
    let tokio_pool = TokioPgStore::pool(&db.url, 4).expect("a tokio-postgres pool");
    let store = Arc::new(TokioPgStore::new(tokio_pool.clone()));
    let service = Widgets::on_tokio_postgres(tokio_pool);
    let alice = Principal::new("alice");

    let mut tx = TxHandle::begin(Arc::clone(&store)).await.unwrap();
    service
        .create_widget(&alice, &mut tx, new_widget("Dropped"))
        .await
        .expect("created");
    drop(tx);
    assert_eq!(rows(&pool).await, 0, "a dropped transaction writes nothing");

    let mut tx = TxHandle::begin(Arc::clone(&store)).await.unwrap();
    let CreateWidgetResponse::Status201 { body, location } = service
        .create_widget(&alice, &mut tx, new_widget("  Gear "))
        .await
        .expect("created");
    assert_eq!(body.name, "Gear", "trimmed");
    assert_eq!(location, format!("/widgets/{}", body.id));
    assert_eq!(tx.resource_ref(), Some(body.id.to_string().as_str()));
    let unseen = service
        .get_widget(&alice, GetWidgetRequest { id: body.id })
        .await;
    assert!(
        matches!(&unseen, Err(HandlerError::Problem(p)) if p.kind() == ProblemKind::NotFound),
        "uncommitted, yet read: {unseen:?}"
    );
    tx.commit().await.unwrap();
    let GetWidgetResponse::Status200(read) = service
        .get_widget(&alice, GetWidgetRequest { id: body.id })
        .await
        .expect("read");
    assert_eq!(read, body);
    let ListWidgetsResponse::Status200(list) = service
        .list_widgets(&Principal::new("bob"), ListWidgetsRequest { limit: 10 })
        .await
        .expect("listed");
    assert!(
        list.items.is_empty(),
        "another owner's widgets are not listed"
    );
    assert_eq!(rows(&pool).await, 1);
}
