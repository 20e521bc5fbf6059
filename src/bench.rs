//! Benchmarks shared by `wgcompute bench` and benches/.
