//! A streaming standby of a throwaway cluster, and its promotion: what the failover tests run a
//! primary and its replica with. Built on the runtime harness's [`Cluster::derive`].

use std::ffi::OsStr;

use idemgen_runtime::testing::{Cluster, HarnessError};

/// A hot standby of `primary` streaming its WAL (`pg_basebackup -X stream -R`), started in a
/// fresh directory on its own port and named `standby` (`application_name`), so that
/// `synchronous_standby_names = 'standby'` on the primary makes its commits wait for it. It
/// streams through `stream_port`: the primary's own port, or a [`crate::Switch`] with a lag in
/// front of it (replication lag on demand). The primary must allow replication connections
/// (`wal_level = replica`, the default).
pub fn standby_of(primary: &Cluster, stream_port: u16) -> Result<Cluster, HarnessError> {
    primary.derive(|dir| {
        let primary_port = primary.port().to_string();
        let out = dir.run_tool(
            "pg_basebackup",
            &[
                OsStr::new("-h"),
                OsStr::new("127.0.0.1"),
                OsStr::new("-p"),
                OsStr::new(&primary_port),
                OsStr::new("-U"),
                OsStr::new("postgres"),
                OsStr::new("-D"),
                dir.data.as_os_str(),
                OsStr::new("-X"),
                OsStr::new("stream"),
                OsStr::new("-R"),
                OsStr::new("--no-sync"),
                OsStr::new("-c"),
                OsStr::new("fast"),
            ],
        )?;
        if !out.status.success() {
            return Err(HarnessError::new(format!(
                "pg_basebackup failed: {}",
                String::from_utf8_lossy(&out.stderr)
            )));
        }
        let auto = dir.data.join("postgresql.auto.conf");
        let mut conf = std::fs::read_to_string(&auto).unwrap_or_default();
        conf.push_str(&format!(
            "port = {port}\nunix_socket_directories = '{sockets}'\nhot_standby = on\n\
             primary_conninfo = 'host=127.0.0.1 port={stream_port} user=postgres \
             application_name=standby'\n",
            port = dir.port,
            sockets = dir.dir.display(),
        ));
        std::fs::write(&auto, conf).map_err(|e| HarnessError::new(format!("writing config: {e}")))
    })
}

/// Promotes a standby to a primary (`pg_ctl promote`, waiting until it accepts writes).
pub fn promote(standby: &Cluster) -> Result<(), HarnessError> {
    let data = standby.dir().join("data");
    let out = standby.run_tool(
        "pg_ctl",
        &[
            OsStr::new("-D"),
            data.as_os_str(),
            OsStr::new("-w"),
            OsStr::new("-t"),
            OsStr::new("60"),
            OsStr::new("promote"),
        ],
    )?;
    if !out.status.success() {
        return Err(HarnessError::new(format!(
            "pg_ctl promote failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(())
}
