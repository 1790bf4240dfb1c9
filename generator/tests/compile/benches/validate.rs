//! What enforcing the spec costs per request (a plain harness, not a timed test): the generated
//! `validate` of the patterns fixture's `addCard` (11 patterns over path, query, header, nested
//! objects, array items, map values, a union and a nullable value; lookaheads and `\p{…}`),
//! beside decoding the same JSON body with serde, which every request pays anyway, and the `hs2`
//! fingerprint of its semantic input.
//!
//! `cargo bench -p idemgen-compile-tests --bench validate` prints the median µs per request of
//! each, and the ratio of validation to decoding, measured side by side in one run.

use std::hint::black_box;
use std::time::{Duration, Instant};

use idemgen_compile_tests::patterns::{AddCard, AddCardRequest, types};
use idemgen_runtime::codegen::{Idempotent, Operation};

const BODY: &str = r##"{"last4":"1234","holder":{"name":"ADA lovelace"},"items":["ABC-1","XYZ-22"],"tags":{"k":"#00ff7f"},"password":"hunter2!x","nickname":"Élodie","contact":"ada@example.com","note":"plain text"}"##;
const ITERATIONS: u32 = 20_000;
const RUNS: usize = 9;

fn request() -> AddCardRequest {
    AddCardRequest {
        account: "acct_42".into(),
        region: Some("DE".into()),
        x_client: "shop/1.2".into(),
        body: serde_json::from_str(BODY).expect("the body decodes"),
    }
}

/// The median time per iteration of `f`, in µs.
fn median_micros(mut f: impl FnMut()) -> f64 {
    let mut runs: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..ITERATIONS {
                f();
            }
            start.elapsed()
        })
        .collect();
    runs.sort();
    runs[RUNS / 2].as_secs_f64() * 1e6 / f64::from(ITERATIONS)
}

fn main() {
    let request = request();
    assert_eq!(AddCard::validate(&request), Ok(()), "the request is valid");
    // Patterns are compiled once per process, on first use; warm them up outside the timing.
    let _ = AddCard::validate(&request);
    let decode = median_micros(|| {
        let body: types::NewCard = serde_json::from_str(black_box(BODY)).unwrap();
        black_box(body);
    });
    let validate = median_micros(|| {
        black_box(AddCard::validate(black_box(&request))).unwrap();
    });
    let fingerprint = median_micros(|| {
        let input = AddCard::semantic_input(black_box(&request));
        black_box(
            idemgen_protocol::Fingerprint::hs2(AddCard::ID, AddCard::FINGERPRINT_VERSION, &input)
                .unwrap(),
        );
    });
    println!("addCard (patterns fixture), median of {RUNS} runs x {ITERATIONS} requests:");
    println!("  decode the JSON body (serde)      {decode:8.3} µs");
    println!("  validate (11 patterns, bounds)    {validate:8.3} µs");
    println!("  hs2 fingerprint of the input      {fingerprint:8.3} µs");
    println!(
        "  validation / decoding             {:8.2}x",
        validate / decode
    );
}
