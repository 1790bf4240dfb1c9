//! What a command prints: text for people, JSON (`--json`) for scripts.

use std::fmt::Write as _;

use serde_json::{Value, json};

use crate::db::{self, Row};

/// Text or JSON, gathered for standard output.
pub struct Out {
    json: bool,
    text: String,
}

/// `writeln!` into the gathered text (writing to a `String` cannot fail).
macro_rules! say {
    ($out:expr, $($arg:tt)*) => {
        let _ = writeln!($out.text, $($arg)*);
    };
}

impl Out {
    pub fn new(json: bool) -> Out {
        Out {
            json,
            text: String::new(),
        }
    }

    pub fn into_text(self) -> String {
        self.text
    }

    pub fn message(&mut self, text: &str) {
        if self.json {
            say!(self, "{}", json!({ "message": text }));
        } else {
            say!(self, "{text}");
        }
    }

    pub fn record(&mut self, row: &Row, body: bool) {
        let value = row.to_json(body);
        if self.json {
            say!(self, "{value}");
            return;
        }
        for (name, field) in value.as_object().into_iter().flatten() {
            let text = match field {
                Value::String(s) => s.clone(),
                Value::Null => "-".into(),
                other => other.to_string(),
            };
            say!(self, "{name:<20} {text}");
        }
    }

    pub fn list(&mut self, rows: &[Row]) {
        if self.json {
            let all: Vec<Value> = rows.iter().map(|r| r.to_json(false)).collect();
            say!(self, "{}", Value::Array(all));
            return;
        }
        say!(
            self,
            "{:<10} {:<24} {:<16} {:<24} {:<6} key",
            "state",
            "created",
            "owner",
            "operation",
            "status"
        );
        for row in rows {
            say!(
                self,
                "{:<10} {:<24} {:<16} {:<24} {:<6} {:?}",
                row.state,
                db::time(row.created_at),
                row.owner,
                row.operation,
                row.response_status
                    .map_or_else(|| "-".to_owned(), |s| s.to_string()),
                row.key
            );
        }
    }

    pub fn stats(&mut self, stats: &db::Stats) {
        if self.json {
            say!(self, "{}", stats.to_json());
            return;
        }
        say!(
            self,
            "{:<24} {:<10} {:>10}",
            "operation",
            "state",
            "records"
        );
        for (operation, state, count) in &stats.by_operation {
            say!(self, "{operation:<24} {state:<10} {count:>10}");
        }
        say!(self, "stranded claims      {}", stats.stranded);
        say!(
            self,
            "oldest claim         {}",
            db::time(stats.oldest_claim)
        );
        say!(self, "expired records      {}", stats.expired);
    }
}

impl Out {
    /// `expire`'s counts by operation and state: deleted (`done`) or due.
    pub fn expired(&mut self, counts: &[(String, String, i64)], done: bool) {
        let total: i64 = counts.iter().map(|(_, _, n)| n).sum();
        if self.json {
            let by: Vec<Value> = counts
                .iter()
                .map(|(o, s, n)| json!({ "operation": o, "state": s, "records": n }))
                .collect();
            let key = if done { "deleted" } else { "due" };
            say!(self, "{}", json!({ key: total, "by_operation": by }));
            return;
        }
        if total == 0 {
            say!(self, "no record's retention has run out");
            return;
        }
        for (operation, state, count) in counts {
            say!(self, "{operation:<24} {state:<10} {count:>10}");
        }
        if done {
            say!(
                self,
                "deleted {total} expired records: retries of their keys execute again"
            );
        } else {
            say!(
                self,
                "would delete {total} expired records; pass --yes to do it"
            );
        }
    }
}
