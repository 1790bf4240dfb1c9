//! Who the caller is: the [`Authenticator`] a service supplies, the [`Principal`] it returns,
//! whose owner scopes every idempotency key, and an operation's [`Security`] as the spec declares
//! it (schemes, scopes, anonymous access), which the pipeline enforces.

use std::borrow::Cow;
use std::future::Future;

use http::HeaderMap;

use crate::problem::{Problem, ProblemKind};

/// The authenticated caller. `owner` scopes idempotency keys: two owners never share a record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal {
    /// The stable identity of the caller (a user or client id), never a client-supplied value;
    /// empty only for [`Principal::anonymous`].
    pub owner: String,
    /// What the credentials used for this request allow, as the authenticator names it (for
    /// the generated `authorize_*` methods). Not part of the key's scope.
    pub roles: Vec<String>,
    /// The OAuth 2 scopes (or, for other schemes, the roles OpenAPI 3.1 lists in a security
    /// requirement) the credentials carry: the pipeline answers 403 when an operation's
    /// `security` requires one that is missing.
    pub scopes: Vec<String>,
    /// The schemes (their names in `components.securitySchemes`) whose credentials the
    /// authenticator verified. An alternative that requires several schemes, or `mutualTLS`
    /// (which no HTTP header proves), is met only by schemes listed here; when the list is
    /// empty, an alternative of one scheme is met by its credential being present (the
    /// authenticator accepted the request).
    pub verified: Vec<String>,
}

impl Principal {
    /// A principal with the given owner identity.
    pub fn new(owner: impl Into<String>) -> Principal {
        Principal {
            owner: owner.into(),
            roles: Vec::new(),
            scopes: Vec::new(),
            verified: Vec::new(),
        }
    }

    /// The caller of an operation whose `security` admits anonymous callers (`security: []`,
    /// or `- {}`) when the request carries no credentials of its schemes. Never the caller of
    /// an idempotent operation: a key needs an owner.
    pub fn anonymous() -> Principal {
        Principal::new(String::new())
    }

    /// Whether this is [`Principal::anonymous`].
    pub fn is_anonymous(&self) -> bool {
        self.owner.is_empty()
    }

    /// The same principal with one more role.
    pub fn with_role(mut self, role: impl Into<String>) -> Principal {
        self.roles.push(role.into());
        self
    }

    /// Whether the principal has `role`.
    pub fn has_role(&self, role: &str) -> bool {
        self.roles.iter().any(|r| r == role)
    }

    /// The same principal with more scopes.
    pub fn with_scopes<S: Into<String>>(
        mut self,
        scopes: impl IntoIterator<Item = S>,
    ) -> Principal {
        self.scopes.extend(scopes.into_iter().map(Into::into));
        self
    }

    /// The same principal, the credentials of `scheme` verified (see [`Principal::verified`]).
    pub fn with_verified(mut self, scheme: impl Into<String>) -> Principal {
        self.verified.push(scheme.into());
        self
    }

    /// Whether the principal's credentials carry `scope`.
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == scope)
    }
}

/// Where an `apiKey` credential travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApiKeyIn {
    /// A request header.
    Header,
    /// A query parameter.
    Query,
    /// A cookie.
    Cookie,
}

/// What kind of credential a security scheme is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SchemeKind {
    /// `type: apiKey`: the header, query parameter or cookie `name`.
    ApiKey {
        /// Its name.
        name: &'static str,
        /// Where it is sent.
        location: ApiKeyIn,
    },
    /// `type: http`: `Authorization: <scheme> <credentials>` (`scheme` lower case).
    Http {
        /// `bearer`, `basic`, …
        scheme: &'static str,
    },
    /// `type: oauth2`: a bearer access token.
    OAuth2,
    /// `type: openIdConnect`: a bearer token.
    OpenIdConnect,
    /// `type: mutualTLS`: a client certificate, verified before the request reaches the
    /// service (by its TLS terminator); always considered presented here.
    MutualTls,
}

/// One scheme of the spec's `components.securitySchemes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Scheme {
    /// Its name in `components.securitySchemes`.
    pub name: &'static str,
    /// Its kind.
    pub kind: SchemeKind,
}

/// A scheme as an operation requires it, with the scopes the credentials must carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Requirement {
    /// The scheme.
    pub scheme: &'static Scheme,
    /// The scopes (roles) required, all of them.
    pub scopes: &'static [&'static str],
}

/// An operation's `security` (protocol.md, "Scope"): alternatives, any one of which suffices,
/// each a set of [`Requirement`]s that must all hold. Generated from the spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Security {
    alternatives: Option<&'static [&'static [Requirement]]>,
    unreadable: bool,
}

impl Security {
    /// Neither the operation nor the document declares `security`: the authenticator decides
    /// alone, as it does for every request.
    pub const UNDECLARED: Security = Security {
        alternatives: None,
        unreadable: false,
    };

    /// The spec declares security for the operation, but none of it can be read (`check`
    /// reports it; a build that was told to ignore that gets this): every request is refused,
    /// never served with less than the spec says.
    pub const UNREADABLE: Security = Security {
        alternatives: Some(&[]),
        unreadable: true,
    };

    /// The spec's `security` for an operation. `&[]` (`security: []`) and an empty alternative
    /// admit anonymous callers.
    pub const fn declared(alternatives: &'static [&'static [Requirement]]) -> Security {
        Security {
            alternatives: Some(alternatives),
            unreadable: false,
        }
    }

    /// Whether the spec declares security for the operation.
    pub fn is_declared(&self) -> bool {
        self.alternatives.is_some()
    }

    /// The alternatives (empty when undeclared).
    pub fn alternatives(&self) -> &'static [&'static [Requirement]] {
        self.alternatives.unwrap_or_default()
    }

    /// Whether a request without credentials may be served (as [`Principal::anonymous`]).
    pub fn admits_anonymous(&self) -> bool {
        !self.unreadable
            && self
                .alternatives
                .is_some_and(|a| a.is_empty() || a.iter().any(|r| r.is_empty()))
    }

    /// The schemes the operation names, each once, in the order written.
    pub fn schemes(&self) -> impl Iterator<Item = &'static Scheme> + '_ {
        let all = self.alternatives().iter().flat_map(|a| a.iter());
        all.clone()
            .enumerate()
            .filter(move |(i, r)| {
                !all.clone()
                    .take(*i)
                    .any(|earlier| earlier.scheme.name == r.scheme.name)
            })
            .map(|(_, r)| r.scheme)
    }

    /// Whether `principal`, authenticated from `credentials`, meets one alternative: every
    /// scheme's credential presented (and verified, where [`Principal::verified`] says so) and
    /// every scope held. `Err` is the answer: 401 when no alternative's credentials are all
    /// there, else 403 naming the missing scopes.
    pub fn check(
        &self,
        credentials: &Credentials<'_>,
        principal: &Principal,
    ) -> Result<(), Problem> {
        if self.unreadable {
            return Err(Problem::new(ProblemKind::Unauthenticated)
                .with_detail("this operation's security cannot be read from its spec"));
        }
        let Some(alternatives) = self.alternatives else {
            return Ok(());
        };
        let met = |alternative: &[Requirement]| {
            alternative.iter().all(|r| {
                let verified = principal.verified.iter().any(|v| v == r.scheme.name);
                match r.scheme.kind {
                    // No header proves a client certificate: only the authenticator can.
                    SchemeKind::MutualTls => verified,
                    _ if !principal.verified.is_empty() || alternative.len() > 1 => {
                        verified && credentials.carries(r.scheme)
                    }
                    _ => credentials.carries(r.scheme),
                }
            })
        };
        let mut missing_scopes: Option<Vec<&str>> = None;
        for alternative in alternatives {
            if !met(alternative) {
                continue;
            }
            let missing: Vec<&str> = alternative
                .iter()
                .flat_map(|r| r.scopes.iter().copied())
                .filter(|s| !principal.has_scope(s))
                .collect();
            if missing.is_empty() {
                return Ok(());
            }
            missing_scopes.get_or_insert(missing);
        }
        match missing_scopes {
            Some(missing) => Err(Problem::new(ProblemKind::Forbidden).with_detail(format!(
                "the credentials lack the scope{} {}",
                if missing.len() == 1 { "" } else { "s" },
                quoted(&missing)
            ))),
            None => {
                let wanted: Vec<String> = alternatives
                    .iter()
                    .map(|a| {
                        a.iter()
                            .map(|r| r.scheme.name)
                            .collect::<Vec<_>>()
                            .join(" and ")
                    })
                    .collect();
                Err(
                    Problem::new(ProblemKind::Unauthenticated).with_detail(format!(
                        "send the credentials of {}",
                        wanted
                            .iter()
                            .map(|w| format!("`{w}`"))
                            .collect::<Vec<_>>()
                            .join(" or ")
                    )),
                )
            }
        }
    }
}

/// The one non-empty value of a credential: `None` when it is absent, empty, not text, or sent
/// more than once (which copy a proxy in front checked is not the service's to guess).
fn only<'a>(mut values: impl Iterator<Item = Option<Cow<'a, str>>>) -> Option<Cow<'a, str>> {
    let first = values.next()??;
    if values.next().is_some() || first.trim().is_empty() {
        return None;
    }
    Some(first)
}

fn quoted(items: &[&str]) -> String {
    items
        .iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What an [`Authenticator`] is handed: the request's headers and query, and the operation's
/// `security` with the credential each of its schemes carries.
#[derive(Debug, Clone, Copy)]
pub struct Credentials<'a> {
    headers: &'a HeaderMap,
    query: Option<&'a str>,
    security: &'a Security,
}

impl<'a> Credentials<'a> {
    /// The credentials of a request with `headers` and `query` to an operation with `security`.
    pub fn new(headers: &'a HeaderMap, query: Option<&'a str>, security: &'a Security) -> Self {
        Credentials {
            headers,
            query,
            security,
        }
    }

    /// The request headers.
    pub fn headers(&self) -> &'a HeaderMap {
        self.headers
    }

    /// The operation's security, as the spec declares it.
    pub fn security(&self) -> &'a Security {
        self.security
    }

    /// The credential the request carries for `scheme`: an `apiKey`'s header, query parameter
    /// (percent-decoded) or cookie value; for `http`, `oauth2` and `openIdConnect`, what follows
    /// the scheme (`Bearer`, `Basic`, compared case-insensitively) in `Authorization`. `None`
    /// when absent, empty or sent more than once, and always for `mutualTLS` (see
    /// [`Credentials::carries`]).
    pub fn credential(&self, scheme: &Scheme) -> Option<Cow<'a, str>> {
        match scheme.kind {
            SchemeKind::ApiKey {
                name,
                location: ApiKeyIn::Header,
            } => only(
                self.headers
                    .get_all(name)
                    .iter()
                    .map(|v| v.to_str().ok().map(Cow::Borrowed)),
            ),
            SchemeKind::ApiKey {
                name,
                location: ApiKeyIn::Query,
            } => only(
                serde_urlencoded::from_str::<Vec<(String, String)>>(self.query?)
                    .ok()?
                    .into_iter()
                    .filter(|(n, _)| n == name)
                    .map(|(_, v)| Some(Cow::Owned(v))),
            ),
            SchemeKind::ApiKey {
                name,
                location: ApiKeyIn::Cookie,
            } => only(
                self.headers
                    .get_all(http::header::COOKIE)
                    .iter()
                    .filter_map(|v| v.to_str().ok())
                    .flat_map(|v| v.split(';'))
                    .filter_map(|pair| pair.trim().split_once('='))
                    .filter(|(n, _)| *n == name)
                    .map(|(_, v)| Some(Cow::Borrowed(v.trim_matches('"')))),
            ),
            SchemeKind::Http { scheme } => self.authorization(scheme),
            SchemeKind::OAuth2 | SchemeKind::OpenIdConnect => self.authorization("bearer"),
            SchemeKind::MutualTls => None,
        }
    }

    /// Whether the request carries `scheme`'s credential (never `mutualTLS`: no header proves a
    /// client certificate, so only the authenticator can, through [`Principal::verified`]).
    pub fn carries(&self, scheme: &Scheme) -> bool {
        self.credential(scheme).is_some()
    }

    /// The operation's schemes whose credentials the request carries, in the order written.
    pub fn presented(&self) -> impl Iterator<Item = &'static Scheme> + '_ {
        self.security.schemes().filter(|s| self.carries(s))
    }

    /// What follows `<scheme> ` in `Authorization`, the scheme compared case-insensitively.
    fn authorization(&self, scheme: &str) -> Option<Cow<'a, str>> {
        let value = self
            .headers
            .get(http::header::AUTHORIZATION)?
            .to_str()
            .ok()?;
        let (given, rest) = value.split_once(' ')?;
        (given.eq_ignore_ascii_case(scheme) && !rest.trim().is_empty())
            .then(|| Cow::Borrowed(rest.trim()))
    }
}

/// Authenticates every request before anything else happens (unless the operation admits
/// anonymous callers and the request carries none of its credentials); `Err` is answered as is
/// (401). The pipeline then checks the operation's `security` against the principal: the scheme
/// credentials present and the scopes held (401, 403).
pub trait Authenticator: Send + Sync + 'static {
    /// Resolves the caller from the request's credentials: [`Credentials::credential`] reads
    /// each scheme the spec declares; [`Credentials::headers`] has everything else.
    fn authenticate(
        &self,
        request: &Credentials<'_>,
    ) -> impl Future<Output = Result<Principal, Problem>> + Send;
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEARER: Scheme = Scheme {
        name: "bearer",
        kind: SchemeKind::Http { scheme: "bearer" },
    };
    const BASIC: Scheme = Scheme {
        name: "basic",
        kind: SchemeKind::Http { scheme: "basic" },
    };
    const HEADER_KEY: Scheme = Scheme {
        name: "apiKey",
        kind: SchemeKind::ApiKey {
            name: "x-api-key",
            location: ApiKeyIn::Header,
        },
    };
    const QUERY_KEY: Scheme = Scheme {
        name: "queryKey",
        kind: SchemeKind::ApiKey {
            name: "api_key",
            location: ApiKeyIn::Query,
        },
    };
    const COOKIE_KEY: Scheme = Scheme {
        name: "session",
        kind: SchemeKind::ApiKey {
            name: "sid",
            location: ApiKeyIn::Cookie,
        },
    };
    const OAUTH: Scheme = Scheme {
        name: "oauth",
        kind: SchemeKind::OAuth2,
    };

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().unwrap());
        }
        map
    }

    #[test]
    fn each_scheme_reads_its_own_credential() {
        let security = Security::UNDECLARED;
        let h = headers(&[
            ("authorization", "bEaReR  tok-1 "),
            ("x-api-key", "k-1"),
            ("cookie", "theme=dark; sid=\"s-1\""),
        ]);
        let c = Credentials::new(&h, Some("a=1&api_key=q%2F1"), &security);
        assert_eq!(c.credential(&BEARER).as_deref(), Some("tok-1"));
        assert_eq!(c.credential(&OAUTH).as_deref(), Some("tok-1"));
        assert_eq!(c.credential(&BASIC), None, "another scheme's Authorization");
        assert_eq!(c.credential(&HEADER_KEY).as_deref(), Some("k-1"));
        assert_eq!(c.credential(&QUERY_KEY).as_deref(), Some("q/1"));
        assert_eq!(c.credential(&COOKIE_KEY).as_deref(), Some("s-1"));
        let bare = HeaderMap::new();
        let none = Credentials::new(&bare, None, &security);
        for scheme in [BEARER, HEADER_KEY, QUERY_KEY, COOKIE_KEY, OAUTH] {
            assert_eq!(none.credential(&scheme), None, "{}", scheme.name);
        }
        let empty = headers(&[("authorization", "Bearer ")]);
        assert_eq!(
            Credentials::new(&empty, None, &security).credential(&BEARER),
            None
        );
    }

    #[test]
    fn security_is_checked_against_credentials_and_scopes() {
        const WRITE: [Requirement; 1] = [Requirement {
            scheme: &OAUTH,
            scopes: &["payments:write"],
        }];
        const KEY_AND_BEARER: [Requirement; 2] = [
            Requirement {
                scheme: &HEADER_KEY,
                scopes: &[],
            },
            Requirement {
                scheme: &BEARER,
                scopes: &[],
            },
        ];
        const SECURITY: Security = Security::declared(&[&WRITE, &KEY_AND_BEARER]);
        let security = SECURITY;
        assert!(!security.admits_anonymous());
        assert_eq!(
            security.schemes().map(|s| s.name).collect::<Vec<_>>(),
            ["oauth", "apiKey", "bearer"]
        );
        let bearer = headers(&[("authorization", "Bearer t")]);
        let c = Credentials::new(&bearer, None, &security);
        // A bearer token is OAuth's credential: with the scope it passes, without it 403.
        assert!(
            security
                .check(&c, &Principal::new("a").with_scopes(["payments:write"]))
                .is_ok()
        );
        let lacking = security.check(&c, &Principal::new("a")).unwrap_err();
        assert_eq!(lacking.kind(), ProblemKind::Forbidden);
        assert!(lacking.detail().unwrap().contains("`payments:write`"));
        // Both credentials of the second alternative, both verified: no scope needed. Merely
        // present, they do not meet it (the authenticator may have checked only one).
        let both = headers(&[("authorization", "Bearer t"), ("x-api-key", "k")]);
        let c = Credentials::new(&both, None, &security);
        let verified = Principal::new("a")
            .with_verified("apiKey")
            .with_verified("bearer");
        assert!(security.check(&c, &verified).is_ok());
        let unverified = security.check(&c, &Principal::new("a")).unwrap_err();
        assert_eq!(
            unverified.kind(),
            ProblemKind::Forbidden,
            "oauth is met, bar its scope"
        );
        let one = security
            .check(&c, &Principal::new("a").with_verified("apiKey"))
            .unwrap_err();
        assert_eq!(one.kind(), ProblemKind::Unauthenticated);
        // An API key alone satisfies neither alternative: 401 naming what to send.
        let key = headers(&[("x-api-key", "k")]);
        let c = Credentials::new(&key, None, &security);
        let missing = security.check(&c, &Principal::new("a")).unwrap_err();
        assert_eq!(missing.kind(), ProblemKind::Unauthenticated);
        assert_eq!(
            missing.detail(),
            Some("send the credentials of `oauth` or `apiKey and bearer`")
        );
        // Undeclared: the authenticator alone decides.
        assert!(Security::UNDECLARED.check(&c, &Principal::new("a")).is_ok());
    }

    #[test]
    fn client_certificates_empty_and_repeated_credentials_prove_nothing() {
        const MTLS: Scheme = Scheme {
            name: "mtls",
            kind: SchemeKind::MutualTls,
        };
        const CERT_OR_SCOPED: [&[Requirement]; 2] = [
            &[Requirement {
                scheme: &MTLS,
                scopes: &[],
            }],
            &[Requirement {
                scheme: &OAUTH,
                scopes: &["payments:write"],
            }],
        ];
        const SECURITY: Security = Security::declared(&CERT_OR_SCOPED);
        let bearer = headers(&[("authorization", "Bearer t")]);
        let c = Credentials::new(&bearer, None, &SECURITY);
        // A token without the scope does not pass through the certificate alternative.
        let refused = SECURITY.check(&c, &Principal::new("a")).unwrap_err();
        assert_eq!(refused.kind(), ProblemKind::Forbidden);
        assert!(
            SECURITY
                .check(&c, &Principal::new("a").with_verified("mtls"))
                .is_ok()
        );
        assert!(!c.carries(&MTLS));
        let security = Security::UNDECLARED;
        for (name, value) in [("x-api-key", ""), ("cookie", "sid=")] {
            let h = headers(&[(name, value)]);
            let c = Credentials::new(&h, Some("api_key="), &security);
            assert_eq!(c.credential(&HEADER_KEY), None, "{name}");
            assert_eq!(c.credential(&COOKIE_KEY), None, "{name}");
            assert_eq!(c.credential(&QUERY_KEY), None, "{name}");
        }
        let twice = headers(&[
            ("x-api-key", "k1"),
            ("x-api-key", "k2"),
            ("cookie", "sid=a; sid=b"),
        ]);
        let c = Credentials::new(&twice, Some("api_key=a&api_key=b"), &security);
        assert_eq!(c.credential(&HEADER_KEY), None);
        assert_eq!(c.credential(&COOKIE_KEY), None);
        assert_eq!(c.credential(&QUERY_KEY), None);
        // Unreadable security refuses everyone, anonymous callers included.
        assert!(!Security::UNREADABLE.admits_anonymous());
        let c = Credentials::new(&bearer, None, &Security::UNREADABLE);
        assert_eq!(
            Security::UNREADABLE
                .check(&c, &Principal::new("a").with_verified("bearer"))
                .unwrap_err()
                .kind(),
            ProblemKind::Unauthenticated
        );
    }

    #[test]
    fn anonymous_access_is_what_the_spec_says() {
        const BEARER_ONLY: [Requirement; 1] = [Requirement {
            scheme: &BEARER,
            scopes: &[],
        }];
        const PUBLIC: Security = Security::declared(&[]);
        const OPTIONAL: Security = Security::declared(&[&[], &BEARER_ONLY]);
        const REQUIRED: Security = Security::declared(&[&BEARER_ONLY]);
        assert!(PUBLIC.admits_anonymous());
        assert!(OPTIONAL.admits_anonymous());
        assert!(!REQUIRED.admits_anonymous());
        assert!(!Security::UNDECLARED.admits_anonymous());
        assert!(Principal::anonymous().is_anonymous());
        assert!(!Principal::new("a").is_anonymous());
    }
}
