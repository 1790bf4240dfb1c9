//! idemgen: the OpenAPI checker and code generator for idempotent operations.
