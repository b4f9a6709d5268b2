//! `leaseq dashboard`: the web dashboard over the backend named by
//! `--backend`, until Ctrl-C.

use std::net::SocketAddr;

use clap::Args;
use leaseq::CancellationToken;
use leaseq_dashboard::Dashboard;

use super::{CliError, Target};

#[derive(Debug, Args)]
pub(crate) struct DashboardArgs {
    /// Where to listen. Anything but loopback needs --token.
    #[arg(long, default_value = "127.0.0.1:7373")]
    listen: SocketAddr,
    /// A token every request must carry (open `/?token=…` once in the
    /// browser); at least 16 characters.
    #[arg(long, env = "LEASEQ_DASHBOARD_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

pub(crate) async fn run(
    url: &Target,
    args: DashboardArgs,
    shutdown: CancellationToken,
) -> Result<(), CliError> {
    let backend = url.connect(false).await?;
    let mut dashboard = Dashboard::new(backend);
    if let Some(token) = args.token {
        dashboard = dashboard.token(token);
    }
    let bound = dashboard
        .bind(args.listen)
        .await
        .map_err(|e| CliError::Usage(e.to_string()))?;
    eprintln!(
        "leaseq dashboard for {} at http://{} (Ctrl-C stops it)",
        url.shown_url(),
        bound.local_addr()
    );
    bound
        .serve(shutdown)
        .await
        .map_err(|e| CliError::Backend(format!("the dashboard server failed: {e}")))
}
