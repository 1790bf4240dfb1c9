-- The orders service's orders (its own database); `charge_id` names the payments service's charge.
CREATE TABLE orders (
    id         uuid PRIMARY KEY,
    owner      text NOT NULL,
    sku        text NOT NULL,
    quantity   integer NOT NULL,
    amount     bigint NOT NULL,
    charge_id  uuid NOT NULL UNIQUE,
    created_at timestamptz NOT NULL DEFAULT now()
);
