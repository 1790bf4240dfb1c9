//! Misuse a user could attempt fails to compile, with the error a user would see (trybuild).

#[test]
fn misuse_does_not_compile() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*.rs");
}
