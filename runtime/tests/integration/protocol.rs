//! protocol.md is the contract: every fingerprint vector in it is checked against the runtime.

use idemgen_protocol::Fingerprint;
use idemgen_protocol::fingerprint::canonical_bytes;

const PROTOCOL: &str = include_str!("../../../protocol.md");

fn vectors() -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    let mut lines = PROTOCOL.lines();
    while let Some(line) = lines.next() {
        if line.trim() == "```json hs1-vector" {
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
