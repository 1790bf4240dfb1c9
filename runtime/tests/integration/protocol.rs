//! protocol.md is the contract: every fingerprint vector in it is checked against the runtime.

use idemgen_protocol::Fingerprint;
use idemgen_protocol::fingerprint::{CanonicalInput, canonical_bytes, canonical_bytes_hs2};

const PROTOCOL: &str = include_str!("../../../protocol.md");

fn vectors() -> Vec<serde_json::Value> {
    vectors_of("hs1")
}

fn vectors_of(format: &str) -> Vec<serde_json::Value> {
    let fence = format!("```json {format}-vector");
    let mut out = Vec::new();
    let mut lines = PROTOCOL.lines();
    while let Some(line) = lines.next() {
        if line.trim() == fence {
            let body: String = lines.by_ref().take_while(|l| l.trim() != "```").collect();
            out.push(serde_json::from_str(&body).expect("vector is JSON"));
        }
    }
    out
}

#[test]
fn every_protocol_vector_matches_the_runtime() {
    let vectors = vectors();
    assert!(
        vectors.len() >= 6,
        "protocol.md has {} vectors",
        vectors.len()
    );
    for v in vectors {
        let op = v["operation"].as_str().unwrap();
        let version = i16::try_from(v["version"].as_i64().unwrap()).unwrap();
        let canonical = canonical_bytes(op, version, &v["input"]).unwrap();
        assert_eq!(
            String::from_utf8(canonical).unwrap(),
            v["canonical"].as_str().unwrap(),
            "canonical bytes of {v}"
        );
        let fp = Fingerprint::hs1(op, version, &v["input"]).unwrap();
        assert_eq!(
            fp.as_str(),
            v["fingerprint"].as_str().unwrap(),
            "fingerprint of {v}"
        );
    }
}

#[test]
fn every_hs2_vector_matches_the_runtime() {
    let vectors = vectors_of("hs2");
    assert!(
        vectors.len() >= 9,
        "protocol.md has {} hs2 vectors",
        vectors.len()
    );
    for v in &vectors {
        let op = v["operation"].as_str().unwrap();
        let version = i16::try_from(v["version"].as_i64().unwrap()).unwrap();
        let canonical = canonical_bytes_hs2(op, version, &v["input"]).unwrap();
        assert_eq!(
            String::from_utf8(canonical).unwrap(),
            v["canonical"].as_str().unwrap(),
            "canonical bytes of {v}"
        );
        let fp = Fingerprint::hs2(op, version, &v["input"]).unwrap();
        assert_eq!(
            fp.as_str(),
            v["fingerprint"].as_str().unwrap(),
            "fingerprint of {v}"
        );
        // The lazy path the executor takes for hs1 records gives hs1's bytes exactly.
        let input = CanonicalInput::new(&v["input"]).unwrap();
        assert_eq!(input.hs2(op, version), fp);
        assert_eq!(
            input.hs1(op, version).unwrap(),
            Fingerprint::hs1(op, version, &v["input"]).unwrap()
        );
    }
    // The file-part vector ("File parts"): its input is what a decoded `FilePart` serialises as.
    let upload = vectors
        .iter()
        .find(|v| v["operation"] == "uploadDocument")
        .expect("the file-part vector");
    let file = idemgen_runtime::FilePart::new(&b"hello\n"[..])
        .with_filename("hello.txt")
        .with_content_type("text/plain");
    assert_eq!(
        upload["input"],
        serde_json::json!({"body": {"document": file, "title": "Q3"}})
    );
    // The vectors the issue is about: 2^53 + 1 and 2^53 differ under hs2 and not under hs1.
    let ledger = |n: u64| {
        vectors
            .iter()
            .find(|v| v["input"]["body"]["ledger_id"].as_u64() == Some(n))
            .unwrap_or_else(|| panic!("a vector with ledger_id {n}"))
    };
    let (odd, even) = (ledger(9_007_199_254_740_993), ledger(9_007_199_254_740_992));
    assert_ne!(odd["fingerprint"], even["fingerprint"]);
    assert_eq!(
        Fingerprint::hs1("createTransfer", 1, &odd["input"]).unwrap(),
        Fingerprint::hs1("createTransfer", 1, &even["input"]).unwrap()
    );
}
