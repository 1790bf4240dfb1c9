//! The protocol's rules every store shares, written once: whether an attempt may take a claim
//! over, the claim loop around a backend's statements, and the conversion of a stored row into a
//! [`Record`]. A backend adds only its SQL and driver code ([`ClaimStatements`], [`RecordRow`]).

use std::time::Duration;

use async_trait::async_trait;

use idemgen_protocol::Fingerprint;

use super::record::{ClaimToken, Record, RecordState};
use super::{ClaimOutcome, ClaimRequest, StoreError};
use crate::response::StoredResponse;

/// Whether `request` may take over the claim `record` holds: an unfinished claim that is stale
/// (older than the request's `stale_after`, or its holder's lease lapsed) of the same request,
/// same fingerprint and fingerprint version (protocol.md, "States and transitions"). A changed
/// request never takes a key over: it is answered 409 while the claim lives and 422 after.
pub(crate) fn may_take_over(record: &Record, fingerprint: &Fingerprint, version: i16) -> bool {
    record.state == RecordState::Claimed
        && record.stale
        && record.fingerprint.as_ref() == Some(fingerprint)
        && record.fingerprint_version == Some(version)
}

/// One claim statement's outcome, as a backend reports it to [`claim`].
pub(crate) enum ClaimStep {
    /// The claim was inserted: the attempt holds the key.
    Inserted,
    /// A record holds the key.
    Held(Record),
    /// Neither: the record that held the key was released, or committed after the statement's
    /// snapshot, or another claim landed between a read and an insert. Ask again.
    Vanished,
}

/// The statements a backend claims a key with, on one connection.
#[async_trait]
pub(crate) trait ClaimStatements: Send {
    /// Inserts the claim when the key has no record, else reads the record that holds it.
    async fn insert_or_read(&mut self, request: &ClaimRequest<'_>)
    -> Result<ClaimStep, StoreError>;

    /// Installs `request`'s token and holder on the claim `held_by` holds, guarded by that token
    /// and by the claim still being stale, judged again by the backend. `false`: another attempt
    /// took it over or completed it first.
    async fn take_over(
        &mut self,
        request: &ClaimRequest<'_>,
        held_by: Option<ClaimToken>,
    ) -> Result<bool, StoreError>;
}

/// How many times [`claim`] asks again before it gives up: a key whose record appears and
/// vanishes this often in a row (claims released as fast as they are taken) is answered as
/// unavailable rather than looped on.
const CLAIM_ROUNDS: u32 = 64;

/// Claims the key, takes over a stale claim of the same request, or reports the record that holds
/// it (`Existing`: the executor judges replay, 409, 410 or 422). Between rounds it backs off from
/// nothing (the first retry is immediate: a release or commit it raced has already happened) to at
/// most 16 ms.
pub(crate) async fn claim(
    statements: &mut impl ClaimStatements,
    request: &ClaimRequest<'_>,
) -> Result<ClaimOutcome, StoreError> {
    for round in 0..CLAIM_ROUNDS {
        if round > 1 {
            tokio::time::sleep(Duration::from_millis(1 << (round - 2).min(4))).await;
        }
        match statements.insert_or_read(request).await? {
            ClaimStep::Inserted => return Ok(ClaimOutcome::Claimed { taken_over: false }),
            ClaimStep::Vanished => {}
            ClaimStep::Held(record)
                if may_take_over(&record, request.fingerprint, request.fingerprint_version) =>
            {
                if statements.take_over(request, record.claim_token).await? {
                    return Ok(ClaimOutcome::Claimed { taken_over: true });
                }
            }
            ClaimStep::Held(record) => return Ok(ClaimOutcome::Existing(record)),
        }
    }
    Err(StoreError::Unavailable(format!(
        "the key's record changed under {CLAIM_ROUNDS} claims in a row"
    )))
}

/// A record's columns as a backend's driver reads them, before the protocol's rules make a
/// [`Record`] of them.
pub(crate) struct RecordRow {
    /// The `state` column.
    pub state: String,
    /// The `fingerprint` column.
    pub fingerprint: Option<String>,
    /// The `fingerprint_version` column.
    pub fingerprint_version: Option<i64>,
    /// The `claim_token` column.
    pub claim_token: Option<uuid::Uuid>,
    /// The statement's staleness judgement (by the store's clock).
    pub stale: bool,
    /// The stored result, when `response_status` is set.
    pub response: Option<ResponseRow>,
}

/// The stored result's columns.
pub(crate) struct ResponseRow {
    /// `response_status`.
    pub status: i64,
    /// `response_headers`, decoded.
    pub headers: Vec<(String, String)>,
    /// `response_body`.
    pub body: Vec<u8>,
}

impl RecordRow {
    /// The record, or an error when a column holds what no store writes: an unknown state, a
    /// fingerprint version out of range, or a stored status that is not a 2xx (only 2xx results
    /// are stored). Such a record is never replayed with a substituted status: the executor
    /// answers it as a store failure (503, the cause logged), and the key stays as it is for an
    /// operator to inspect.
    pub(crate) fn into_record(self) -> Result<Record, StoreError> {
        let state = RecordState::parse(&self.state)
            .ok_or_else(|| StoreError::Other(format!("unknown record state {:?}", self.state)))?;
        let fingerprint_version = self
            .fingerprint_version
            .map(|v| {
                i16::try_from(v)
                    .map_err(|_| StoreError::Other(format!("fingerprint version {v} out of range")))
            })
            .transpose()?;
        let response = self
            .response
            .map(|stored| {
                let status = u16::try_from(stored.status)
                    .ok()
                    .filter(|s| (200..300).contains(s))
                    .ok_or_else(|| {
                        StoreError::Other(format!(
                            "stored response status {} is not a 2xx",
                            stored.status
                        ))
                    })?;
                Ok::<_, StoreError>(StoredResponse {
                    status,
                    headers: stored.headers,
                    body: stored.body,
                })
            })
            .transpose()?;
        Ok(Record {
            state,
            fingerprint: self.fingerprint.map(Fingerprint::from_stored),
            fingerprint_version,
            claim_token: self.claim_token.map(ClaimToken),
            stale: self.stale,
            response,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(status: i64) -> RecordRow {
        RecordRow {
            state: "completed".into(),
            fingerprint: Some("hs2:00".into()),
            fingerprint_version: Some(1),
            claim_token: None,
            stale: false,
            response: Some(ResponseRow {
                status,
                headers: vec![],
                body: b"{}".to_vec(),
            }),
        }
    }

    #[test]
    fn only_a_stored_2xx_makes_a_record() {
        assert_eq!(
            row(201).into_record().unwrap().response.unwrap().status,
            201
        );
        for status in [-1, 0, 199, 300, 409, 500, 65_536 + 201] {
            let error = row(status).into_record().unwrap_err();
            assert!(
                error.to_string().contains(&status.to_string()),
                "{status}: {error}"
            );
        }
        let mut unknown = row(200);
        unknown.state = "pending".into();
        assert!(unknown.into_record().is_err());
        let mut version = row(200);
        version.fingerprint_version = Some(40_000);
        assert!(version.into_record().is_err());
    }

    #[test]
    fn only_a_stale_claim_of_the_same_request_is_taken_over() {
        let fingerprint = Fingerprint::from_stored("hs2:aa".into());
        let claim = Record {
            state: RecordState::Claimed,
            fingerprint: Some(fingerprint.clone()),
            fingerprint_version: Some(2),
            claim_token: None,
            stale: true,
            response: None,
        };
        assert!(may_take_over(&claim, &fingerprint, 2));
        assert!(!may_take_over(&claim, &fingerprint, 3));
        let other = Fingerprint::from_stored("hs2:bb".into());
        assert!(!may_take_over(&claim, &other, 2));
        let live = Record {
            stale: false,
            ..claim.clone()
        };
        assert!(!may_take_over(&live, &fingerprint, 2));
        let completed = Record {
            state: RecordState::Completed,
            ..claim
        };
        assert!(!may_take_over(&completed, &fingerprint, 2));
    }
}
