//! `wgcompute devices`: every adapter, its limits and memory.

use anyhow::Result;
use clap::Args;
use wgcompute::ByteSize;

#[derive(Args)]
pub struct DevicesArgs {
    /// Print one JSON document instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: &DevicesArgs) -> Result<()> {
    let adapters = wgcompute::list_adapters();
    let cache_dir = wgcompute::tuning_cache_dir();
    if args.json {
        let mut described = Vec::with_capacity(adapters.len());
        for adapter in &adapters {
            let mut value = serde_json::to_value(adapter)?;
            value["tuning_cache_file"] = serde_json::json!(wgcompute::tuning_cache_file(adapter));
            described.push(value);
        }
        let document = serde_json::json!({
            "adapters": described,
            "tuning_cache_dir": cache_dir,
        });
        println!("{}", serde_json::to_string_pretty(&document)?);
        return Ok(());
    }
    if adapters.is_empty() {
        println!("no adapters found. On Debian/Ubuntu, `apt-get install mesa-vulkan-drivers` gives a CPU Vulkan driver.");
        return Ok(());
    }
    println!(
        "{:<5} {:<40} {:<7} {:<10} {:<12} {:>12} {:>12}  memory",
        "index", "name", "backend", "type", "driver", "max buffer", "max binding"
    );
    for adapter in adapters {
        println!(
            "{:<5} {:<40} {:<7} {:<10} {:<12} {:>12} {:>12}  {}",
            adapter.index,
            adapter.name,
            adapter.backend,
            adapter.device_type,
            adapter.driver,
            ByteSize(adapter.max_buffer_size).to_string(),
            ByteSize(adapter.max_storage_binding_size).to_string(),
            adapter.memory
        );
    }
    match cache_dir {
        Some(dir) => println!("tuned kernel picks are cached in {}", dir.display()),
        None => println!("no cache directory: kernel picks are tuned anew in each process"),
    }
    Ok(())
}
