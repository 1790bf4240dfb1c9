//! The vocabulary of diagnostics, below everything that produces or reads them: the rule ids
//! with their default levels and help, the levels, and a [`Finding`]. The rules, the lock
//! comparison, the config and the reports all name these; none of them is imported upward.

use serde::Deserialize;

use crate::loader::{FileId, Span};

/// How serious a finding is, or that its rule is turned off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// The rule is not run.
    Off,
    /// Reported; fails the check only with `--deny-warnings`.
    Warning,
    /// Reported; fails the check.
    Error,
}

impl Level {
    /// The lower-case name used in config files and machine-readable output.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Off => "off",
            Level::Warning => "warning",
            Level::Error => "error",
        }
    }
}

/// Identifies a rule. The string form ([`RuleId::as_str`]) is the stable id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RuleId {
    /// An idempotent operation lacks the idempotency header parameter.
    KeyMissing,
    /// The idempotency header is not `required: true`.
    KeyNotRequired,
    /// The idempotency header's schema is not `type: string`.
    KeyNotString,
    /// The idempotency header's `maxLength` is absent or above the limit.
    KeyMaxLength,
    /// The idempotency header's `minLength` is absent or below 1.
    KeyMinLength,
    /// An idempotent operation lacks a required response status.
    RequiredResponseMissing,
    /// An idempotent operation lacks a recommended response status (409, 410).
    RecommendedResponseMissing,
    /// An error response of an idempotent operation lacks `application/problem+json`.
    ErrorResponseNotProblemJson,
    /// An idempotent operation has no `operationId`.
    OperationIdMissing,
    /// Two operations share an `operationId`.
    OperationIdDuplicate,
    /// `x-idempotent` is not a boolean.
    XIdempotentNotBoolean,
    /// `x-idempotency-fingerprint-version` is not an integer in 1..=32767.
    FingerprintVersionInvalid,
    /// An `x-idempotency-*` extension that idemgen does not know.
    UnknownIdempotencyExtension,
    /// `x-idempotent` or `x-idempotency-*` outside an Operation Object.
    IdempotencyExtensionMisplaced,
    /// `x-idempotent: true` on GET, HEAD, OPTIONS or TRACE.
    XIdempotentOnSafeMethod,
    /// The idempotency header is declared but `x-idempotent` is absent.
    KeyWithoutXIdempotent,
    /// The semantic input changed shape since `idemgen.lock` was written, without a version bump.
    FingerprintShapeChanged,
    /// `x-idempotency-tombstones` names no idempotent operation.
    TombstoneTargetInvalid,
    /// The idempotency header's schema has no `pattern`.
    KeyPattern,
    /// An operation without an idempotency key does not declare 503.
    UnavailableResponseMissing,
    /// The spec has no operations at all.
    NoOperations,
    /// A `$ref` does not resolve (nothing at its pointer, a cycle, a remote or unreadable file).
    UnresolvedRef,
    /// Keys written beside an operation's `$ref`, which OpenAPI readers ignore.
    RefSiblingsIgnored,
    /// A request or response media type the generator does not type (forms, multipart, XML,
    /// event streams) or drops beside another.
    MediaTypeUntyped,
    /// An idempotent operation whose only success responses are streams.
    StreamNotReplayable,
    /// A schema's `pattern` is not an ECMA-262 regular expression the engine compiles.
    PatternInvalid,
    /// A `security` list, requirement or scheme the generated server cannot enforce as written.
    SecurityInvalid,
    /// A security requirement names no scheme of `components.securitySchemes`.
    SecuritySchemeUnknown,
    /// An idempotent operation admits anonymous callers (`security: []` or `- {}`).
    IdempotentAnonymous,
    /// `x-idempotency-retention` is not a duration, or is on an operation without records.
    RetentionInvalid,
    /// The idempotency key header is marked `x-idempotency-fingerprint: true`.
    KeyFingerprinted,
    /// A schema's `default` is not a value of that schema.
    DefaultInvalid,
    /// A discriminator's `mapping` names a schema that is not an alternative, or an alternative
    /// lacks the discriminator property.
    DiscriminatorInvalid,
    /// A `paths` key the generated router cannot register (axum would panic at start-up).
    PathUnroutable,
    /// A parameter serialised in a way the generated code does not read or send.
    ParameterUnsupported,
    /// `callbacks` or `webhooks`: requests the API sends, for which nothing is generated.
    CallbacksNotGenerated,
    /// A validation keyword of a request schema that the generated server does not check.
    KeywordNotEnforced,
    /// A response status code written as a bare YAML number (`200:`), which OpenAPI forbids.
    ResponseCodeUnquoted,
    /// A `pattern` nests an unbounded repetition in another (`^(a+)+$`).
    PatternNestedQuantifier,
}

impl RuleId {
    /// Every rule, in documentation order.
    pub const ALL: [RuleId; 39] = [
        RuleId::KeyMissing,
        RuleId::KeyNotRequired,
        RuleId::KeyNotString,
        RuleId::KeyMaxLength,
        RuleId::KeyMinLength,
        RuleId::KeyPattern,
        RuleId::KeyFingerprinted,
        RuleId::RequiredResponseMissing,
        RuleId::RecommendedResponseMissing,
        RuleId::ErrorResponseNotProblemJson,
        RuleId::OperationIdMissing,
        RuleId::OperationIdDuplicate,
        RuleId::XIdempotentNotBoolean,
        RuleId::FingerprintVersionInvalid,
        RuleId::UnknownIdempotencyExtension,
        RuleId::IdempotencyExtensionMisplaced,
        RuleId::XIdempotentOnSafeMethod,
        RuleId::KeyWithoutXIdempotent,
        RuleId::FingerprintShapeChanged,
        RuleId::TombstoneTargetInvalid,
        RuleId::UnavailableResponseMissing,
        RuleId::NoOperations,
        RuleId::UnresolvedRef,
        RuleId::RefSiblingsIgnored,
        RuleId::MediaTypeUntyped,
        RuleId::ParameterUnsupported,
        RuleId::PathUnroutable,
        RuleId::CallbacksNotGenerated,
        RuleId::KeywordNotEnforced,
        RuleId::ResponseCodeUnquoted,
        RuleId::StreamNotReplayable,
        RuleId::PatternInvalid,
        RuleId::PatternNestedQuantifier,
        RuleId::SecurityInvalid,
        RuleId::SecuritySchemeUnknown,
        RuleId::IdempotentAnonymous,
        RuleId::RetentionInvalid,
        RuleId::DefaultInvalid,
        RuleId::DiscriminatorInvalid,
    ];

    /// The stable id.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleId::KeyMissing => "idempotency-key-missing",
            RuleId::KeyNotRequired => "idempotency-key-not-required",
            RuleId::KeyNotString => "idempotency-key-not-string",
            RuleId::KeyMaxLength => "idempotency-key-max-length",
            RuleId::KeyMinLength => "idempotency-key-min-length",
            RuleId::RequiredResponseMissing => "required-response-missing",
            RuleId::RecommendedResponseMissing => "recommended-response-missing",
            RuleId::ErrorResponseNotProblemJson => "error-response-not-problem-json",
            RuleId::OperationIdMissing => "operation-id-missing",
            RuleId::OperationIdDuplicate => "operation-id-duplicate",
            RuleId::XIdempotentNotBoolean => "x-idempotent-not-boolean",
            RuleId::FingerprintVersionInvalid => "fingerprint-version-invalid",
            RuleId::UnknownIdempotencyExtension => "unknown-idempotency-extension",
            RuleId::IdempotencyExtensionMisplaced => "idempotency-extension-misplaced",
            RuleId::XIdempotentOnSafeMethod => "x-idempotent-on-safe-method",
            RuleId::KeyWithoutXIdempotent => "idempotency-key-without-x-idempotent",
            RuleId::FingerprintShapeChanged => "fingerprint-shape-changed",
            RuleId::TombstoneTargetInvalid => "tombstone-target-invalid",
            RuleId::KeyPattern => "idempotency-key-pattern",
            RuleId::UnavailableResponseMissing => "unavailable-response-missing",
            RuleId::NoOperations => "no-operations",
            RuleId::UnresolvedRef => "unresolved-ref",
            RuleId::RefSiblingsIgnored => "ref-siblings-ignored",
            RuleId::MediaTypeUntyped => "media-type-untyped",
            RuleId::StreamNotReplayable => "stream-not-replayable",
            RuleId::PatternInvalid => "pattern-invalid",
            RuleId::SecurityInvalid => "security-invalid",
            RuleId::SecuritySchemeUnknown => "security-scheme-unknown",
            RuleId::IdempotentAnonymous => "idempotent-anonymous",
            RuleId::RetentionInvalid => "retention-invalid",
            RuleId::KeyFingerprinted => "idempotency-key-fingerprinted",
            RuleId::DefaultInvalid => "default-invalid",
            RuleId::DiscriminatorInvalid => "discriminator-invalid",
            RuleId::PathUnroutable => "path-unroutable",
            RuleId::ParameterUnsupported => "parameter-unsupported",
            RuleId::CallbacksNotGenerated => "callbacks-not-generated",
            RuleId::KeywordNotEnforced => "keyword-not-enforced",
            RuleId::ResponseCodeUnquoted => "response-code-unquoted",
            RuleId::PatternNestedQuantifier => "pattern-nested-quantifier",
        }
    }

    /// The rule with the stable id `name`.
    pub fn from_name(name: &str) -> Option<RuleId> {
        RuleId::ALL.into_iter().find(|r| r.as_str() == name)
    }

    /// The level used unless the config overrides it.
    pub fn default_level(self) -> Level {
        match self {
            RuleId::KeyMinLength
            | RuleId::KeyPattern
            | RuleId::UnavailableResponseMissing
            | RuleId::NoOperations
            | RuleId::MediaTypeUntyped
            | RuleId::ParameterUnsupported
            | RuleId::CallbacksNotGenerated
            | RuleId::KeywordNotEnforced
            | RuleId::ResponseCodeUnquoted
            | RuleId::PatternNestedQuantifier
            | RuleId::RecommendedResponseMissing
            | RuleId::ErrorResponseNotProblemJson
            | RuleId::KeyWithoutXIdempotent
            | RuleId::DefaultInvalid
            | RuleId::DiscriminatorInvalid => Level::Warning,
            _ => Level::Error,
        }
    }

    /// A one-line description of what the rule requires.
    pub fn summary(self) -> &'static str {
        match self {
            RuleId::KeyMissing => {
                "An idempotent operation declares the idempotency key header parameter."
            }
            RuleId::KeyNotRequired => "The idempotency key header is `required: true`.",
            RuleId::KeyNotString => "The idempotency key header's schema is `type: string`.",
            RuleId::KeyMaxLength => {
                "The idempotency key header's schema bounds `maxLength` within the configured limit."
            }
            RuleId::KeyMinLength => {
                "The idempotency key header's schema sets `minLength` to at least 1."
            }
            RuleId::RequiredResponseMissing => {
                "An idempotent operation declares every required error response."
            }
            RuleId::RecommendedResponseMissing => {
                "An idempotent operation declares 409 and 410 (another attempt in flight, the created resource deleted)."
            }
            RuleId::ErrorResponseNotProblemJson => {
                "Error responses of idempotent operations use `application/problem+json`."
            }
            RuleId::OperationIdMissing => {
                "An idempotent operation has an `operationId`; the runtime scopes keys by it."
            }
            RuleId::OperationIdDuplicate => "Every `operationId` is unique across the spec.",
            RuleId::XIdempotentNotBoolean => "`x-idempotent` is a boolean.",
            RuleId::FingerprintVersionInvalid => {
                "`x-idempotency-fingerprint-version` is an integer from 1 to 32767."
            }
            RuleId::UnknownIdempotencyExtension => {
                "Only known `x-idempotency-*` extensions are used."
            }
            RuleId::IdempotencyExtensionMisplaced => {
                "`x-idempotent` and `x-idempotency-*` appear only on operations."
            }
            RuleId::XIdempotentOnSafeMethod => {
                "GET, HEAD, OPTIONS and TRACE operations are not marked `x-idempotent: true`."
            }
            RuleId::KeyWithoutXIdempotent => {
                "An operation that declares the idempotency key header is marked `x-idempotent`."
            }
            RuleId::FingerprintShapeChanged => {
                "A change of an idempotent operation's semantic input comes with a bump of `x-idempotency-fingerprint-version` (checked against `idemgen.lock`)."
            }
            RuleId::TombstoneTargetInvalid => {
                "`x-idempotency-tombstones` names idempotent operations of the spec by their `operationId` (one, or a list)."
            }
            RuleId::KeyPattern => {
                "The idempotency key header's schema has a `pattern` (visible ASCII), so that tools generate keys the server accepts."
            }
            RuleId::UnavailableResponseMissing => {
                "An operation without an idempotency key declares 503 (its database unreachable)."
            }
            RuleId::NoOperations => "The spec has at least one operation under `paths`.",
            RuleId::UnresolvedRef => {
                "Every `$ref` resolves: a loaded file has something at its pointer, without a cycle (remote references are not fetched)."
            }
            RuleId::RefSiblingsIgnored => {
                "An operation written as a `$ref` has nothing beside it but `summary` and `description`: the referenced operation is read, keys beside the `$ref` are not."
            }
            RuleId::MediaTypeUntyped => {
                "Every request and response media type is one the generator types (JSON, `text/*`, raw bytes), and none is dropped beside another."
            }
            RuleId::StreamNotReplayable => {
                "An idempotent operation has a success response that is not a stream: a stream cannot be stored and replayed."
            }
            RuleId::PatternInvalid => {
                "Every schema `pattern` is an ECMA-262 regular expression (with the `u` flag), which the generated code enforces."
            }
            RuleId::SecurityInvalid => {
                "`security` is a list of requirement objects whose scopes are strings, and every scheme it uses is one a server checks (apiKey in a header, query or cookie; http with a scheme; oauth2; openIdConnect; mutualTLS)."
            }
            RuleId::SecuritySchemeUnknown => {
                "Every scheme a security requirement names is declared in `components.securitySchemes`."
            }
            RuleId::IdempotentAnonymous => {
                "An idempotent operation requires credentials: its keys are scoped to the authenticated caller."
            }
            RuleId::RetentionInvalid => {
                "`x-idempotency-retention` is a duration from `1s` to `36500d` (`30d`, `12h`, `90m`, `3600s`) on an idempotent operation."
            }
            RuleId::KeyFingerprinted => {
                "The idempotency key header is not marked `x-idempotency-fingerprint: true`: the key names the request, it is never part of it."
            }
            RuleId::DefaultInvalid => {
                "Every schema `default` is a value of its schema (type, enum, const, bounds): the generated code applies it to absent values."
            }
            RuleId::PathUnroutable => {
                "Every `paths` key is a path template the generated router can register: it starts with `/`, has no `?` or `#`, its parameters are whole segments (or a segment's end), and it is not an earlier template with its parameters renamed."
            }
            RuleId::ParameterUnsupported => {
                "Every parameter is serialised as the generated code reads and sends it: no cookies, arrays in the query one pair per item (`form`, exploded), no objects in the query, path segments as written (`simple`)."
            }
            RuleId::CallbacksNotGenerated => {
                "The spec has no `callbacks` or `webhooks`, requests the API sends, for which idemgen generates nothing."
            }
            RuleId::DiscriminatorInvalid => {
                "A discriminator's `mapping` names only alternatives of its `oneOf`/`anyOf`, and every alternative has the discriminator property."
            }
            RuleId::PatternNestedQuantifier => {
                "A `pattern` does not repeat a repetition (`^(a+)+$`): backtracking engines take time exponential in a value's length on it."
            }
            RuleId::ResponseCodeUnquoted => {
                "Response status codes are quoted (`'200':`): OpenAPI's keys are strings, and a bare `200` is a YAML number."
            }
            RuleId::KeywordNotEnforced => {
                "Every validation keyword of a request schema is one the generated server checks: a request the spec forbids is never accepted in silence."
            }
        }
    }

    /// A YAML snippet that fixes a violation, filled in with the key header's name and the
    /// largest key length allowed.
    pub fn help(self, header: &str, max: u64) -> String {
        match self {
            RuleId::KeyMissing => format!(
                "declare the header in the operation's parameters (inline or as a $ref):\n\nparameters:\n  - name: {header}\n    in: header\n    required: true\n    schema:\n      type: string\n      minLength: 1\n      maxLength: {max}\n      pattern: '^[!-~]+$'"
            ),
            RuleId::KeyNotRequired => format!(
                "make the header required:\n\n- name: {header}\n  in: header\n  required: true"
            ),
            RuleId::KeyNotString => "give the header a string schema:\n\nschema:\n  type: string".to_string(),
            RuleId::KeyMaxLength => format!(
                "bound the key length (at most {max}):\n\nschema:\n  type: string\n  maxLength: {max}"
            ),
            RuleId::KeyMinLength => "reject empty keys:\n\nschema:\n  type: string\n  minLength: 1".to_string(),
            RuleId::RequiredResponseMissing | RuleId::RecommendedResponseMissing => {
                "declare the responses, for example:\n\nresponses:\n  \"422\":\n    description: Unprocessable Content\n    content:\n      application/problem+json: {}".to_string()
            }
            RuleId::ErrorResponseNotProblemJson => "describe the error body as a problem document (RFC 9457):\n\ncontent:\n  application/problem+json:\n    schema:\n      $ref: \"#/components/schemas/Problem\"".to_string(),
            RuleId::OperationIdMissing => "name the operation:\n\noperationId: createWidget".to_string(),
            RuleId::OperationIdDuplicate => "give each operation its own name:\n\noperationId: createWidgetV2".to_string(),
            RuleId::XIdempotentNotBoolean => "use a boolean, not a string or number:\n\nx-idempotent: true".to_string(),
            RuleId::FingerprintVersionInvalid => "use an integer from 1 to 32767:\n\nx-idempotency-fingerprint-version: 1".to_string(),
            RuleId::UnknownIdempotencyExtension => "the known extensions are:\n\nx-idempotent: true\nx-idempotency-fingerprint-version: 1\nx-idempotency-tombstones: [createWidget]   # on the delete of what createWidget made\nx-idempotency-fingerprint: true           # on a header parameter whose value is part of the request\nx-idempotency-retention: 30d              # how long the operation's records are kept".to_string(),
            RuleId::IdempotencyExtensionMisplaced => "put the extension on the operation itself:\n\npaths:\n  /widgets:\n    post:\n      x-idempotent: true".to_string(),
            RuleId::XIdempotentOnSafeMethod => "safe methods are idempotent by definition: remove the marker, or say the method needs no key:\n\nx-idempotent: false".to_string(),
            RuleId::FingerprintShapeChanged => "bump the fingerprint version, so that requests stored under the old meaning answer 422 `idempotency_fingerprint_version_changed` instead of being compared with requests that now mean something else:\n\nx-idempotency-fingerprint-version: 2\n\nor revert the change to the operation's path or query parameters or body. Without either, every record stored before the change would look like a reused key (422) to an unchanged retry, or a new request could be replayed a result that meant something else.".to_string(),
            RuleId::KeyPattern => "accept visible ASCII only, as the server does:\n\nschema:\n  type: string\n  pattern: '^[!-~]+$'".to_string(),
            RuleId::UnavailableResponseMissing => "declare it:\n\nresponses:\n  \"503\":\n    description: Service Unavailable\n    content:\n      application/problem+json: {}".to_string(),
            RuleId::UnresolvedRef => "point the reference at a component that exists, for example:\n\nschema:\n  $ref: \"#/components/schemas/Widget\"".to_string(),
            RuleId::RefSiblingsIgnored => "move the key into the operation the $ref points at, for example:\n\n# resources/droplets/droplets_create.yml\noperationId: droplets_create\nx-idempotent: true".to_string(),
            RuleId::MediaTypeUntyped => "serve the body as JSON, or accept that it is handled as raw bytes:\n\ncontent:\n  application/json:\n    schema:\n      $ref: \"#/components/schemas/Widget\"".to_string(),
            RuleId::StreamNotReplayable => "give the operation a stored success response (JSON), or drop x-idempotent:\n\nresponses:\n  \"200\":\n    content:\n      application/json:\n        schema:\n          $ref: \"#/components/schemas/Completion\"".to_string(),
            RuleId::NoOperations => "check that this is the root document: a split spec's root lists its paths, each a $ref to a file:\n\npaths:\n  /widgets:\n    $ref: paths/widgets.yaml".to_string(),
            RuleId::TombstoneTargetInvalid => "name the idempotent operations whose records are about what this operation deletes:\n\ndelete:\n  operationId: deleteWidget\n  x-idempotency-tombstones: [createWidget, publishWidget]".to_string(),
            RuleId::PatternInvalid => "write the pattern in ECMA-262 syntax (JSON Schema's dialect): escape only syntax characters, close every group and class:\n\npattern: '^[0-9]{4}$'".to_string(),
            RuleId::SecurityInvalid => "write security as a list of requirements, each naming declared schemes with their scopes:\n\nsecurity:\n  - bearer: []\n  - oauth: [payments:write]\ncomponents:\n  securitySchemes:\n    bearer: {type: http, scheme: bearer}\n    apiKey: {type: apiKey, in: header, name: X-Api-Key}".to_string(),
            RuleId::SecuritySchemeUnknown => "declare the scheme the requirement names:\n\ncomponents:\n  securitySchemes:\n    bearer:\n      type: http\n      scheme: bearer".to_string(),
            RuleId::RetentionInvalid => "write a whole number and a unit (s, m, h, d), longer than your clients' retry window:\n\nx-idempotent: true\nx-idempotency-retention: 30d".to_string(),
            RuleId::IdempotentAnonymous => "require credentials on the operation (a key needs an owner), or drop x-idempotent:\n\nsecurity:\n  - bearer: []".to_string(),
            RuleId::KeyFingerprinted => format!(
                "remove the marker from the key header; mark the headers whose value is part of the request instead:\n\n- name: {header}\n  in: header\n  required: true\n  # no x-idempotency-fingerprint here\n- name: X-Account-Id\n  in: header\n  x-idempotency-fingerprint: true"
            ),
            RuleId::DefaultInvalid => "make the default a value the schema accepts, or remove it:\n\nlimit:\n  type: integer\n  minimum: 1\n  default: 20".to_string(),
            RuleId::DiscriminatorInvalid => "map each tag to one of the alternatives, each of which has the property:\n\noneOf:\n  - $ref: \"#/components/schemas/Card\"\ndiscriminator:\n  propertyName: type\n  mapping:\n    card: \"#/components/schemas/Card\"".to_string(),
            RuleId::PathUnroutable => "write the path template alone, one parameter per segment, and tell operations apart by their method, not by a suffix of the key:\n\npaths:\n  /accounts/{sid}:\n    get:\n      operationId: getAccount".to_string(),
            RuleId::ParameterUnsupported => "send arrays as repeated query parameters and objects in the body, or accept that the generated code reads the value as one string:\n\n- name: ids\n  in: query\n  style: form\n  explode: true\n  schema:\n    type: array\n    items:\n      type: string".to_string(),
            RuleId::CallbacksNotGenerated => "send them from your handlers with a client of their own, and describe them apart (an OpenAPI document of the receiver's), or turn the rule off in idemgen.toml:\n\n[rules]\ncallbacks-not-generated = \"off\"".to_string(),
            RuleId::KeyWithoutXIdempotent => "enable the runtime for the operation, or opt out explicitly:\n\nx-idempotent: true    # or `false` to acknowledge that the header is not enforced".to_string(),
            RuleId::PatternNestedQuantifier => "repeat one thing, or separate the repetitions by a character the inner one cannot match:\n\npattern: '^[a-z]+(-[a-z]+)*$'".to_string(),
            RuleId::ResponseCodeUnquoted => "quote the status code (idemgen reads it as the code it spells; other tools read a number, or refuse it):\n\nresponses:\n  '200':\n    description: OK".to_string(),
            RuleId::KeywordNotEnforced => "say it with keywords the generated server checks (string enums, `const`, lengths, bounds, counts and `pattern` on typed values), or check it in your handler:\n\nstatus:\n  type: string\n  enum: [active, retired]   # a Rust enum: checked as it is decoded".to_string(),
        }
    }
}

impl std::fmt::Display for RuleId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One violation of a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The rule.
    pub rule: RuleId,
    /// `Error` or `Warning` (never `Off`).
    pub level: Level,
    /// What is wrong, as a sentence without a trailing period.
    pub message: String,
    /// The file the finding points into.
    pub file: FileId,
    /// The most precise span for the problem.
    pub span: Span,
    /// Labels (`POST /widgets`) of the operations affected; a shared component (a `$ref`'d
    /// parameter, say) yields one finding listing every operation that uses it.
    pub operations: Vec<String>,
    /// The rule's help snippet.
    pub help: String,
}
