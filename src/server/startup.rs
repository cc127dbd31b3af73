//! Connection start-up: no authentication, a process id and cancel key registered for
//! CancelRequest, and the parameters a PostgreSQL 16 server reports (`server_version` names
//! saql in PostgreSQL's form, the one [`crate::runtime::pg::functions`] gives everywhere).

use std::fmt::Debug;
use std::sync::{Arc, LazyLock};

use async_trait::async_trait;
use futures::sink::Sink;
use pgwire::api::auth::{
    finish_authentication, protocol_negotiation, save_startup_parameters_to_metadata,
    DefaultServerParameterProvider, StartupHandler,
};
use pgwire::api::{
    ClientInfo, ConnectionGuard, ConnectionHandle, PidSecretKeyGenerator,
    RandomPidSecretKeyGenerator,
};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};

use super::handler::Connection;
use crate::runtime::pg::functions::server_version;

/// Process ids are unique across the server's connections.
static PIDS: LazyLock<RandomPidSecretKeyGenerator> =
    LazyLock::new(RandomPidSecretKeyGenerator::default);

/// What the server reports at start-up, with or without passwords.
pub(super) fn parameters() -> DefaultServerParameterProvider {
    let mut p = DefaultServerParameterProvider::default();
    p.server_version = server_version();
    p.date_style = "ISO, MDY".into();
    p.time_zone = "UTC".into();
    p
}

#[async_trait]
impl StartupHandler for Connection {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if let PgWireFrontendMessage::Startup(ref startup) = message {
            protocol_negotiation(client, startup).await?;
            save_startup_parameters_to_metadata(client, startup);
            let (pid, key) = PIDS.generate(client);
            client.set_pid_and_secret_key(pid, key);
            let (pid, key) = client.pid_and_secret_key();
            let (handle, guard) = self.manager().register(pid, key);
            let extensions = client.session_extensions();
            extensions.insert::<Arc<ConnectionHandle>>(handle);
            extensions.insert::<ConnectionGuard>(guard);
            finish_authentication(client, &parameters()).await?;
        }
        Ok(())
    }
}
