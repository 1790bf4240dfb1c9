-- The widgets example's own tables. The idempotency records live in the runtime's migration.
CREATE TABLE widgets (
    id          uuid        PRIMARY KEY,
    owner       text        NOT NULL,
    name        text        NOT NULL,
    color       text        NULL,
    published   boolean     NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX widgets_owner_created ON widgets (owner, created_at DESC);

-- Events to publish, appended in the same transaction as the state change they announce.
CREATE TABLE outbox (
    id          bigserial   PRIMARY KEY,
    widget_id   uuid        NOT NULL,
    channel     text        NOT NULL,
    payload     jsonb       NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
