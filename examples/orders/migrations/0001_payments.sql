-- The payments service's charges (its own database).
CREATE TABLE charges (
    id         uuid PRIMARY KEY,
    owner      text NOT NULL,
    reference  text NOT NULL,
    amount     bigint NOT NULL CHECK (amount > 0),
    currency   text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
