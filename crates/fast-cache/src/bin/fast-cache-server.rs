//! `fast-cache-server`: the Redis-compatible server, built by the facade's `server` feature
//! (`cargo install fast-cache --features server`). The same program as `fc-server`.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    fast_cache::server::set_allocator_name("mimalloc");
    fast_cache::server::run("fast-cache-server")
}
