//! An operation's `security`, read as OpenAPI defines it: the operation's own list, else the
//! document's; a list of alternatives (any one suffices), each a set of scheme requirements (all
//! must hold), a scheme named by its key in `components.securitySchemes` with the scopes it needs.
//! `security: []` and an empty alternative (`- {}`) admit anonymous callers.
//!
//! The view keeps positions, so that the rules report what cannot be read where it is written
//! and the IR lowers only what was read.

use crate::loader::{Key, LoadedSpec, Node, NodeRef};
use crate::spec::Operation;

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

/// What a Security Scheme Object says, as far as a server can check it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SchemeKind {
    /// `type: apiKey`: a named header, query parameter or cookie.
    ApiKey {
        /// The header, parameter or cookie name.
        name: String,
        /// Where it is sent.
        location: ApiKeyIn,
    },
    /// `type: http`: `Authorization: <scheme> <credentials>`; the scheme lower case (`bearer`,
    /// `basic`, …).
    Http {
        /// The HTTP authentication scheme, lower case.
        scheme: String,
    },
    /// `type: oauth2`: a bearer access token whose scopes the authenticator reports.
    OAuth2,
    /// `type: openIdConnect`: a bearer ID/access token, scopes as for OAuth 2.
    OpenIdConnect,
    /// `type: mutualTLS`: a client certificate, which a TLS-terminating proxy verifies.
    MutualTls,
}

/// A scheme as an operation requires it.
#[derive(Debug, Clone, Copy)]
pub struct Requirement<'a> {
    /// The scheme's name as written in the requirement.
    pub name: &'a Key,
    /// The scheme, when `components.securitySchemes` has it (after `$ref`s).
    pub scheme: Option<NodeRef<'a>>,
    /// The scopes (or roles) listed for it.
    pub scopes: &'a Node,
}

/// One Security Requirement Object: every requirement in it must hold.
#[derive(Debug, Clone)]
pub struct Alternative<'a> {
    /// Where it is written.
    pub node: NodeRef<'a>,
    /// Its requirements; none: anonymous callers are admitted.
    pub requirements: Vec<Requirement<'a>>,
}

/// An operation's effective security.
#[derive(Debug, Clone)]
pub struct Security<'a> {
    /// The `security` value that applies (the operation's, else the document's).
    pub site: NodeRef<'a>,
    /// The key it is written under, for positions.
    pub key: &'a Key,
    /// Whether it is the document's (inherited by the operation).
    pub inherited: bool,
    /// Its alternatives, in order; none (`security: []`): no security.
    pub alternatives: Vec<Alternative<'a>>,
}

impl Security<'_> {
    /// Whether a caller without credentials may call the operation: `security: []`, or an
    /// empty alternative (`- {}`).
    pub fn admits_anonymous(&self) -> bool {
        self.alternatives.is_empty() || self.alternatives.iter().any(|a| a.requirements.is_empty())
    }
}

/// The security that applies to `op`; `None` when neither the operation nor the document
/// declares any (the service's authenticator then decides alone).
pub fn of<'a>(spec: &'a LoadedSpec, op: &Operation<'a>) -> Option<Security<'a>> {
    let (file, key, node, inherited) = match op.node.node.entry("security") {
        Some((key, node)) => (op.node.file, key, node, false),
        None => {
            let root = spec.root();
            let (key, node) = root.node.entry("security")?;
            (root.file, key, node, true)
        }
    };
    let site = NodeRef { file, node };
    let alternatives = node
        .as_seq()
        .unwrap_or_default()
        .iter()
        .map(|alternative| Alternative {
            node: NodeRef {
                file,
                node: alternative,
            },
            requirements: alternative
                .as_map()
                .map(|m| m.entries())
                .unwrap_or_default()
                .iter()
                .map(|(name, scopes)| Requirement {
                    name,
                    scheme: scheme(spec, &name.text),
                    scopes,
                })
                .collect(),
        })
        .collect();
    Some(Security {
        site,
        key,
        inherited,
        alternatives,
    })
}

/// `components.securitySchemes.<name>`, after `$ref`s.
pub fn scheme<'a>(spec: &'a LoadedSpec, name: &str) -> Option<NodeRef<'a>> {
    let root = spec.root();
    let node = root
        .node
        .get("components")?
        .get("securitySchemes")?
        .get(name)?;
    let scheme = spec.deref(NodeRef {
        file: root.file,
        node,
    });
    scheme.node.as_map().is_some().then_some(scheme)
}

/// What a Security Scheme Object is, or why it cannot be read.
pub fn kind(scheme: &Node) -> Result<SchemeKind, String> {
    let text = |key: &str| scheme.get(key).and_then(Node::as_str);
    match text("type") {
        Some("apiKey") => {
            let name = text("name")
                .filter(|n| !n.is_empty())
                .ok_or("an `apiKey` scheme needs a `name`")?;
            let location = match text("in") {
                Some("header") => ApiKeyIn::Header,
                Some("query") => ApiKeyIn::Query,
                Some("cookie") => ApiKeyIn::Cookie,
                Some(other) => {
                    return Err(format!(
                        "`in: {other}` is not a place for an `apiKey` (header, query or cookie)"
                    ));
                }
                None => {
                    return Err("an `apiKey` scheme needs `in` (header, query or cookie)".into());
                }
            };
            if location == ApiKeyIn::Header && !is_token(name) {
                return Err(format!("`{name}` is not a valid header name"));
            }
            Ok(SchemeKind::ApiKey {
                name: name.to_owned(),
                location,
            })
        }
        Some("http") => {
            let scheme = text("scheme")
                .filter(|s| is_token(s))
                .ok_or("an `http` scheme needs a `scheme` (bearer, basic, …)")?;
            Ok(SchemeKind::Http {
                scheme: scheme.to_ascii_lowercase(),
            })
        }
        Some("oauth2") => Ok(SchemeKind::OAuth2),
        Some("openIdConnect") => Ok(SchemeKind::OpenIdConnect),
        Some("mutualTLS") => Ok(SchemeKind::MutualTls),
        Some(other) => Err(format!(
            "`type: {other}` is not a security scheme type (apiKey, http, oauth2, openIdConnect, mutualTLS)"
        )),
        None => Err("a security scheme needs a `type`".into()),
    }
}

/// The scopes of a requirement, when they are a list of strings.
pub fn scopes(node: &Node) -> Option<Vec<String>> {
    node.as_seq()?
        .iter()
        .map(|s| s.as_str().map(str::to_owned))
        .collect()
}

/// An RFC 9110 token (header names, authentication schemes).
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}
