//! `fc-server`: the fast-cache Redis-compatible server (the command line is `fc_server::cli`).

#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    #[cfg(feature = "mimalloc")]
    fc_server::set_allocator_name("mimalloc");
    fc_server::cli::run("fc-server")
}
