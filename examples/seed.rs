//! The seed workload in user code: a linear layer x[10,10000]·W[10000,1000], softmax cross-entropy, Adam,
//! 100 steps; then the same job again in a second session with another memory cap. Run:
//! `cargo run --release --example seed [STEPS]`.

use std::sync::Arc;

use wgcompute::{Adam, AdamConfig, Linear, MemoryLimit, Optimizer, Session, SessionOptions, Tape};

/// Trains for `steps` steps in a session capped at `limit`; returns the first and last cost.
pub fn train(limit: MemoryLimit, steps: usize) -> wgcompute::Result<(f32, f32)> {
    let session = Session::open(SessionOptions::default().memory_limit(limit))?;
    let layer = Linear::from_tensors(session.randn(&[10_000, 1_000], 1)?, None);
    let mut adam = Adam::new(AdamConfig {
        lr: 0.001,
        ..AdamConfig::default()
    });
    let x = Arc::new(session.empty(&[10, 10_000])?);
    let y = Arc::new(session.empty(&[10, 1_000])?);
    let mut costs = Vec::new();
    for step in 0..steps as u64 {
        x.fill_uniform_(2 * step, 0.0, 1.0)?;
        y.fill_uniform_(2 * step + 1, 0.0, 1.0)?;
        let mut tape = Tape::new();
        let (xv, yv) = (tape.constant(&x), tape.constant(&y));
        let logits = layer.forward(&mut tape, xv)?;
        let losses = tape.softmax_cross_entropy(logits, yv)?;
        let cost = tape.mean(losses)?;
        costs.push(tape.value(cost)?.to_vec()?[0]);
        let gradients = tape.backward(cost)?;
        adam.step(&layer.parameters(), &gradients)?;
    }
    let report = session.close();
    println!(
        "{limit:?}: cost {:.3} → {:.3}; memory before open {}, after close {}",
        costs[0],
        costs[costs.len() - 1],
        report.memory_before_open,
        report.memory_after_close
    );
    Ok((costs[0], costs[costs.len() - 1]))
}

fn main() -> wgcompute::Result<()> {
    let steps = std::env::args()
        .nth(1)
        .and_then(|text| text.parse().ok())
        .unwrap_or(100);
    train(MemoryLimit::Bytes(1 << 30), steps)?;
    train(MemoryLimit::Bytes(4 << 30), steps)?;
    Ok(())
}
