//! GitHub workflow-command annotations.

use idemgen::Config;
use idemgen::report::{Format, render};

use crate::common::check_fixture;

#[test]
fn one_annotation_per_finding_with_escaped_message() {
    let report = check_fixture("split/openapi.yaml", &Config::default());
    let out = render(&report, Format::Github, false);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(
        lines[0].starts_with(
            "::error file=tests/fixtures/split/components/parameters.yaml,line=8,col=16,endLine=8,endColumn=20,title=idempotency-key-max-length::the `Idempotency-Key` header's `maxLength` is 1024, above the limit of 255%0A%0Ahelp: bound the key length"
        ),
        "{}",
        lines[0]
    );
    assert!(
        lines[1]
            .starts_with("::warning file=tests/fixtures/split/paths/widgets.yaml,line=7,col=3,")
    );
    assert!(lines.iter().all(|l| !l.contains('\r')));
}
