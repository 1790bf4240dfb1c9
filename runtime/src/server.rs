//! [`Server`]: what every endpoint of a service shares (the user's API, the authenticator, the
//! executor and its store, the settings), the state of a generated router.

use std::sync::Arc;

use crate::executor::Executor;
use crate::request::DEFAULT_BODY_LIMIT;
use crate::store::Store;

/// Settings of the request pipeline.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The largest request body accepted; larger ones are answered 413 before anything else
    /// happens.
    pub body_limit: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            body_limit: DEFAULT_BODY_LIMIT,
        }
    }
}

/// What every endpoint of a service shares: the user's API implementation `A`, the
/// authenticator, the executor on store `S`, and the settings. The state of a generated router.
pub struct Server<A, S: Store, Au> {
    pub(crate) api: Arc<A>,
    pub(crate) authenticator: Arc<Au>,
    pub(crate) executor: Executor<S>,
    pub(crate) config: Arc<ServerConfig>,
}

impl<A, S: Store, Au> Clone for Server<A, S, Au> {
    fn clone(&self) -> Self {
        Server {
            api: Arc::clone(&self.api),
            authenticator: Arc::clone(&self.authenticator),
            executor: self.executor.clone(),
            config: Arc::clone(&self.config),
        }
    }
}

impl<A, S: Store, Au> std::fmt::Debug for Server<A, S, Au> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<A, S: Store, Au> Server<A, S, Au> {
    /// A server for `api` (shared, so that the caller may keep a handle on it), authenticating
    /// with `authenticator` and running attempts on `executor`, with the default settings.
    pub fn new(api: Arc<A>, authenticator: Au, executor: Executor<S>) -> Server<A, S, Au> {
        Server {
            api,
            authenticator: Arc::new(authenticator),
            executor,
            config: Arc::new(ServerConfig::default()),
        }
    }

    /// The same server with other settings.
    pub fn with_config(mut self, config: ServerConfig) -> Server<A, S, Au> {
        self.config = Arc::new(config);
        self
    }

    /// The API implementation.
    pub fn api(&self) -> &Arc<A> {
        &self.api
    }

    /// The executor.
    pub fn executor(&self) -> &Executor<S> {
        &self.executor
    }

    /// The settings.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }
}
