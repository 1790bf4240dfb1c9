//! `idemgen-delay-proxy`: [`idemgen_testdb::DelayProxy`] as a process, for `bench/http/run.sh`'s
//! database-latency scenarios. It forwards `--listen` to `--upstream`, holding every byte
//! `--one-way-ms` in each direction, and answers each connection to `--stats` with one line,
//! `<round trips> <connections>`, the totals since it started (`read -r rt conns
//! </dev/tcp/127.0.0.1/PORT` in bash).

use std::io::Write as _;
use std::net::{SocketAddr, TcpListener};
use std::time::Duration;

use clap::Parser;
use idemgen_testdb::DelayProxy;

#[derive(Parser, Debug)]
#[command(about = "A TCP proxy adding a fixed delay each way, counting round trips.")]
struct Args {
    /// Where clients connect.
    #[arg(long)]
    listen: SocketAddr,
    /// The server (PostgreSQL).
    #[arg(long)]
    upstream: SocketAddr,
    /// The delay added in each direction, in milliseconds (0.5: half a millisecond).
    #[arg(long)]
    one_way_ms: f64,
    /// Where the counters are read.
    #[arg(long)]
    stats: SocketAddr,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        args.one_way_ms.is_finite() && args.one_way_ms >= 0.0,
        "--one-way-ms: a delay of 0 or more milliseconds"
    );
    let one_way = Duration::from_secs_f64(args.one_way_ms / 1000.0);
    let proxy = DelayProxy::start(args.listen, args.upstream, one_way)?;
    let stats = TcpListener::bind(args.stats)?;
    for conn in stats.incoming() {
        let Ok(mut conn) = conn else { continue };
        let counters = proxy.counters();
        let _ = writeln!(
            conn,
            "{} {}",
            counters.round_trips(),
            counters.connections()
        );
    }
    Ok(())
}
